#!/usr/bin/env bash
# Bundle a build for the GPU machine: executables, libparatrain.so, and the shared libraries
# they need that the GPU image may lack (Boost, OpenBLAS, HDF5, ...). CUDA, NCCL, MPI and the C
# runtime are left to the image. On the GPU machine, `source <bundle>/env.sh` links in only
# the libraries the image does not already resolve (ldconfig there decides) and sets PATH.
#
#   scripts/device_bundle.sh [build-dir] [bundle-dir]     (defaults: build .devbundle/main)
set -euo pipefail
build=${1:-build}
dest=${2:-.devbundle/main}
[ -x "$build/paratrain" ] || { echo "device_bundle: $build/paratrain not built" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib"
bins=("$build/paratrain")
while IFS= read -r t; do bins+=("$t"); done < <(find "$build/tests" -maxdepth 1 -type f \( -name 'paratrain_tests_*' -o -name 'paratrain_comm_probe' \) -perm -u+x 2>/dev/null)
cp "${bins[@]}" "$dest/bin/"
cp -L "$build"/libparatrain.so* "$dest/lib/" 2>/dev/null || true
# Libraries the image provides itself (CUDA, NCCL, MPI stack, C/C++ runtime): never carried.
deny='^(libc|libm|libdl|librt|libpthread|ld-linux|linux-vdso|libgcc_s|libstdc\+\+|libcud|libcublas|libnccl|libnvrtc|libnvJitLink|libmpi|libopen-pal|libopen-rte|libhwloc|libevent|libudev|libz|libparatrain)'
for f in "${bins[@]}" "$dest"/lib/libparatrain.so*; do
  ldd "$f" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r name path; do
  if ! [[ $name =~ $deny ]]; then cp -L "$path" "$dest/lib/$name"; fi
done
strip --strip-unneeded "$dest"/bin/* 2>/dev/null || true
# The device tool carries at most 64 MiB: ship bin/ and lib/ as one xz archive (~5x smaller).
tar -C "$dest" -cf - bin lib | xz -T0 -6 > "$dest/payload.tar.xz"
rm -rf "$dest/bin" "$dest/lib"
cat > "$dest/env.sh" <<'ENV'
# Source on the GPU machine: unpacks the payload, puts the bundle's executables on PATH and
# the bundle's copy of each library the system cannot resolve on LD_LIBRARY_PATH.
_pt_bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ -d "$_pt_bundle/bin" ] || tar -C "$_pt_bundle" -xJf "$_pt_bundle/payload.tar.xz"
mkdir -p "$_pt_bundle/use"
for _pt_lib in "$_pt_bundle"/lib/*; do
  _pt_name=$(basename "$_pt_lib")
  case "$_pt_name" in libparatrain.so*) ln -sf "$_pt_lib" "$_pt_bundle/use/$_pt_name"; continue;; esac
  if ! ldconfig -p | grep -q " $_pt_name "; then ln -sf "$_pt_lib" "$_pt_bundle/use/$_pt_name"; fi
done
export LD_LIBRARY_PATH="$_pt_bundle/use${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$_pt_bundle/bin:$PATH"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for _pt_bin in "$_pt_bundle"/bin/*; do
  if ldd "$_pt_bin" | grep -q 'not found'; then echo "env.sh: unresolved libraries for $_pt_bin:"; ldd "$_pt_bin" | grep 'not found'; fi
done
unset _pt_bundle _pt_lib _pt_name _pt_bin
ENV
du -sh "$dest"
