#!/usr/bin/env python3
# A toy discrete-time model of one sub-partition of fwd90mo (the d64 forward, three consumer
# warpgroups in a ring), written in the forty-fifth session (docs/perf.md "Prepared: the d64
# forward's halves"): a warp a warpgroup, the products a FIFO shared by the warpgroups
# (Q K^T and P V 256 clocks each a warpgroup-tile at the tensor cores' full rate), one
# multi-function unit (a warp's MUFU.EX2 holds it 8 clocks), one issue slot a clock, the
# turn ring's order. It reaches the units' bound (1,536 clocks a 192 x 128 round) over the
# prefix and post-work lengths tried, where sm90 measures about 3,030: what the real tile
# waits on is not in it. Usage: python3 scripts/d64-ring-model.py [QK] [PREFIX] [POST]
import sys
QK, PV = int(sys.argv[1]) if len(sys.argv)>1 else 256, 256
PREFIX = int(sys.argv[2]) if len(sys.argv)>2 else 115   # row-1 max before the first MUFU
NMUFU = 64
OTHER = 230   # FFMA/FADD/FMNMX of the softmax that fill gaps (issue slots)
POST = int(sys.argv[3]) if len(sys.argv)>3 else 100   # put_p + rescale after PV wait
TURN = 40     # named barrier + issue of 12 wgmma
NW = 3
tiles = 200
# state machine per warp
class W: pass
ws=[]
for i in range(NW):
    w=W(); w.state='turnwait'; w.t=0; w.mufu_left=0; w.other_left=0; w.qk_done=None; w.pv_done=None; w.tiles=0; w.busy=0
    ws.append(w)
turn=0          # whose turn
tensor_free=0   # time the tensor queue drains
mufu_free=0
t=0
starts=[]
while min(w.tiles for w in ws) < tiles:
    issued=False
    for k in range(NW):
        w=ws[(k+t)%NW]
        if w.busy>t: continue
        if w.state=='turnwait':
            if turn==ws.index(w):
                # issue QK(i+1) then PV(i)
                s=max(tensor_free,t+TURN); w.qk_done=s+QK; w.pv_done=s+QK+PV; tensor_free=w.pv_done
                turn=(turn+1)%NW; w.state='qkwait'; w.busy=t+TURN
                if ws.index(w)==0: starts.append(t)
        elif w.state=='qkwait':
            if t>=w.qk_done: w.state='prefix'; w.busy=t+PREFIX; w.mufu_left=NMUFU; w.other_left=OTHER
        elif w.state=='prefix':
            w.state='exp'
        elif w.state=='exp':
            if issued: continue
            if w.mufu_left>0 and mufu_free<=t:
                mufu_free=t+8; w.mufu_left-=1; issued=True; w.busy=t+1
            elif w.other_left>0:
                w.other_left-=1; issued=True; w.busy=t+1
            if w.mufu_left==0 and w.other_left==0: w.state='pvwait'
        elif w.state=='pvwait':
            if t>=w.pv_done: w.state='post'; w.busy=t+POST
        elif w.state=='post':
            w.tiles+=1; w.state='turnwait'
    t+=1
d=[b-a for a,b in zip(starts[50:],starts[51:])]
print("round clocks (steady): %.0f  (tensor %d, mufu %d)"%(sum(d)/len(d), NW*(QK+PV), NW*NMUFU*8))
