package cuda

import (
	"fmt"
	"strings"
	"unsafe"
)

// DeviceUUID is the UUID of CUDA device `ordinal` of this process as nvidia-smi prints it
// ("GPU-5b7ea7b3-9a6c-1f84-0d3a-6e2c42f1b7a0"): the physical card, which the device's name
// and index (after CUDA_VISIBLE_DEVICES) do not tell apart. cuDeviceGetUuid_v2 (CUDA 11.4),
// else cuDeviceGetUuid. On a MIG instance (its name says "MIG") the v2 call gives the
// instance's UUID, which nvidia-smi -L writes "MIG-...".
func DeviceUUID(ordinal int) (uuid string, err error) {
	err = onDevice(ordinal, func(d *lib, s scratch, dev uint64) error {
		// the 16 bytes of a CUuuid into slots 2 and 3
		if err := d.call("cuDeviceGetUuid_v2", s.ptr(2), dev); err != nil {
			if err = d.call("cuDeviceGetUuid", s.ptr(2), dev); err != nil {
				return err
			}
		}
		var u [16]byte
		copy(u[:], (*[16]byte)(unsafe.Pointer(&s.p[2]))[:])
		prefix := "GPU"
		if name, err := deviceName(d, dev); err == nil && strings.Contains(" "+name+" ", " MIG ") {
			prefix = "MIG"
		}
		uuid = FormatUUID(prefix, u)
		return nil
	})
	return uuid, err
}

// onDevice runs fn with the driver, a scratch (slot 0 taken) and the CUdevice of `ordinal`.
func onDevice(ordinal int, fn func(d *lib, s scratch, dev uint64) error) error {
	d, err := driver()
	if err != nil {
		return err
	}
	s := newScratch()
	defer s.free()
	if err := d.call("cuDeviceGet", s.ptr(0), uint64(ordinal)); err != nil {
		return fmt.Errorf("CUDA device %d: %w", ordinal, err)
	}
	return fn(d, s, uint64(s.i32(0)))
}

// FormatUUID writes 16 bytes as nvidia-smi writes a device's UUID: the prefix ("GPU", or
// "MIG" for an instance), "-", and the bytes in hex, grouped 4-2-2-2-6.
func FormatUUID(prefix string, u [16]byte) string {
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
