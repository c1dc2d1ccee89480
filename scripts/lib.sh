# Shared paths and helpers for dprof's scripts. Sourced, not run.
# Everything expensive lives in a cache outside the repo, keyed by what it was built from.

DPROF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DPROF_CACHE=${DPROF_CACHE:-/var/cache/dprof}
# The kernel and its Rust code must be built by Debian's rustc, whose `core` source matches
# (rust-web-src); the rustup toolchain on PATH is for userland only.
KERNEL_RUSTC=/usr/bin/rustc
KERNEL_RUST_LIB_SRC=/usr/lib/rustlib/src/rust/library
BINDGEN_VERSION=0.73.2
BINDGEN_ROOT=$DPROF_CACHE/tools/bindgen-cli-$BINDGEN_VERSION
BINDGEN=$BINDGEN_ROOT/bin/bindgen
KERNEL_TARBALL=/usr/src/linux-source-6.12.tar.xz
KERNEL_FRAGMENT=$DPROF_ROOT/tests/qemu/kernel.config
# The debug variant of the guest kernel (DPROF_KERNEL_VARIANT=debug, scripts/test
# --debug-kernel): the same kernel with sanitizers and lock checking added by a second
# fragment. It is built, cached and packed apart from the default one, so the two never mix.
KERNEL_DEBUG_FRAGMENT=$DPROF_ROOT/tests/qemu/kernel-debug.config
DPROF_KERNEL_VARIANT=${DPROF_KERNEL_VARIANT:-}
case "$DPROF_KERNEL_VARIANT" in
  ""|debug) ;;
  *) printf 'dprof: error: DPROF_KERNEL_VARIANT=%s: only "debug" or empty\n' "$DPROF_KERNEL_VARIANT" >&2; exit 1 ;;
esac
export DPROF_KERNEL_VARIANT
# Userland binaries go to the guest; one target dir for the whole workspace.
CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$DPROF_ROOT/target}
export CARGO_TARGET_DIR

log() { printf '\033[1m[dprof %s]\033[0m %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'dprof: error: %s\n' "$*" >&2; exit 1; }

# The Debian package version of the kernel source, e.g. 6.12.117-1~deb12u1.
kernel_source_version() {
  dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null || die "linux-source-6.12 is not installed: run scripts/setup"
}

# The config fragments of the chosen variant, in the order they apply.
kernel_fragments() {
  echo "$KERNEL_FRAGMENT"
  if [ "$DPROF_KERNEL_VARIANT" = debug ]; then echo "$KERNEL_DEBUG_FRAGMENT"; fi
}

# Key of a kernel build: source version + config fragments + the tools that shape the output.
kernel_build_key() {
  {
    kernel_source_version
    # shellcheck disable=SC2046
    cat $(kernel_fragments)
    "$KERNEL_RUSTC" --version
    clang --version | head -n1
    echo "bindgen $BINDGEN_VERSION"
  } | sha256sum | cut -c1-16
}

# Directory names avoid the '~' of Debian versions, which make and Kbuild paths handle badly.
kernel_version_tag() { kernel_source_version | tr '~+:' '___'; }
kernel_src_dir() { echo "$DPROF_CACHE/src/linux-source-6.12-$(kernel_version_tag)"; }
kernel_build_dir() { echo "$DPROF_CACHE/kernel/$(kernel_version_tag)${DPROF_KERNEL_VARIANT:+-$DPROF_KERNEL_VARIANT}-$(kernel_build_key)"; }

# Where the chosen variant's dprof.ko and selftest/*.ko are built: the source tree for the
# default kernel, a copy of the module sources for the debug one (Kbuild builds in the
# source directory, and a module must match the kernel it loads into).
kmod_out_dir() {
  if [ "$DPROF_KERNEL_VARIANT" = debug ]; then echo "$CARGO_TARGET_DIR/kmod-debug/kmod"; else echo "$DPROF_ROOT/kmod"; fi
}
# The guest initramfs of the chosen variant.
guest_initramfs() { echo "$CARGO_TARGET_DIR/guest/initramfs${DPROF_KERNEL_VARIANT:+-$DPROF_KERNEL_VARIANT}.gz"; }

# Extracts the kernel source tarball into kernel_src_dir unless done already; prints the
# directory. The kernel build and perf's build (scripts/build-perf) share it.
ensure_kernel_source() {
  local src
  src=$(kernel_src_dir)
  if [ ! -f "$src/.dprof-extracted" ]; then
    [ -f "$KERNEL_TARBALL" ] || die "$KERNEL_TARBALL is missing (package linux-source-6.12): run scripts/setup"
    log "kernel: extracting $KERNEL_TARBALL"
    rm -rf "$src" "$src.tmp"
    mkdir -p "$src.tmp"
    tar -C "$src.tmp" -xf "$KERNEL_TARBALL"
    mv "$src.tmp/linux-source-6.12" "$src"
    rmdir "$src.tmp"
    touch "$src/.dprof-extracted"
  fi
  echo "$src"
}

# make arguments every kernel and module build uses.
kernel_make_args() {
  echo "LLVM=1 RUSTC=$KERNEL_RUSTC BINDGEN=$BINDGEN RUST_LIB_SRC=$KERNEL_RUST_LIB_SRC"
}
