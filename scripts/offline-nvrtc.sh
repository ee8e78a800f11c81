#!/bin/sh
# NVRTC and ptxas for sm_90a on a machine without a GPU or CUDA: CUDA 12.4's libnvrtc,
# headers, ptxas, cuobjdump and nvdisasm from Debian trixie's non-free packages, unpacked
# into DIR (nothing installed system-wide but an apt source for trixie's non-free part),
# then the sm90 variants compiled with ptxas's report: registers, spills, serialised wgmma.
#
#   sh scripts/offline-nvrtc.sh [DIR] [VARIANTS]     (default DIR ~/.cache/longca-cuda124,
#                                                    VARIANTS sm90)
# With LONGCA_OFFLINE_CUBIN_DIR set, each variant's cubin is written there
# (nvdisasm -c DIR/NAME.cubin reads the SASS), and with LONGCA_OFFLINE_PTX=1 its PTX beside it;
# LONGCA_OFFLINE_EXTRA="NAME NAME=VALUE" adds trial defines.
set -eu
dir=${1:-$HOME/.cache/longca-cuda124}
variants=${2:-sm90}
lib=$dir/root/usr/lib/x86_64-linux-gnu
if [ ! -f "$lib/libnvrtc.so.12" ] || [ ! -f "$dir/root/usr/include/cuda_bf16.h" ]; then
	src=/etc/apt/sources.list.d/longca-trixie-nonfree.sources
	[ -f "$src" ] || printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: trixie\nComponents: non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' >"$src"
	apt-get update -qq
	mkdir -p "$dir" && cd "$dir"
	apt-get download -qq nvidia-cuda-toolkit nvidia-cuda-dev libnvrtc12 libnvrtc-builtins12.4
	for f in ./*.deb; do dpkg -x "$f" root; done
	cd - >/dev/null
fi
LONGCA_OFFLINE_CUDA_INCLUDE=$dir/root/usr/include LD_LIBRARY_PATH=$lib \
	go test -count=1 -tags nvrtc ./kernels/cuda -run TestOfflineCompile -v -offline.variants "$variants"
