package sim
import ("testing";"fmt";"context";"time";"github.com/longca/longca/mask";"github.com/longca/longca/kernels";"github.com/longca/longca/tensor";"github.com/longca/longca/spmd/cp")
func TestDbgProf(t *testing.T){
 o := Options{Machine: MachinePresets["h100-ib"], Kernel: KernelPresets["fa3-h100"]}
 n := 512
 sp,_ := mask.Build("causal", n*8192, mask.Options{Seed:42, Purpose: mask.PurposeCP})
 docs,_ := sp.Docs()
 p := kernels.Problem{HeadsQ:64, HeadsKV:8, HeadDim:128, DType: tensor.BF16, Mask: sp.Mask}
 for _, name := range []string{"ring-p2p"} {
 m,_ := cp.New(name)
 cfg := cp.Config{Ranks:n, HeadFirst:true, Docs: docs}
 t0 := time.Now()
 _, _, err := Predict(context.Background(), m, cfg, p, []kernels.Pass{kernels.Fwd, kernels.Bwd}, o)
 fmt.Println(err, time.Since(t0))
 }
}
