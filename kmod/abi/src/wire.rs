//! The dprof kernel-to-user ABI: records read from `/dev/dprof` and the ioctl structures.
//!
//! This file is the one definition. Userland compiles it as the `dprof-abi` crate; the kernel
//! module includes it with `#[path]` because Kbuild cannot use Cargo crates. It therefore uses
//! `core` only, has no dependencies and no `unsafe`.
//!
//! Everything is little-endian and encoded field by field (never by transmuting structs), so
//! the layout below is the layout on the wire whatever the compiler does with padding.
//!
//! # Records
//! A record is a [`RecordHeader`] (16 bytes: kind, size, cpu, time) followed by a payload whose
//! size is fixed per kind. Sizes are multiples of [`RECORD_ALIGN`]. Timestamps come from one
//! NMI-safe clock that is monotonic across CPUs (`ktime_get_mono_fast_ns`).
//!
//! # ioctls
//! | request | direction | argument |
//! |---|---|---|
//! | [`IOC_VERSION`] | read | [`VersionInfo`] |
//! | [`IOC_CONFIGURE`] | write | [`Config`] |
//! | [`IOC_START`] | none | - |
//! | [`IOC_STOP`] | none | - |
//! | [`IOC_STATUS`] | read/write | [`Status`] (+ an array of [`CpuStatus`] it points to) |
//! | [`IOC_HISTORY_PLAN`] | write | [`HistoryPlan`]; after `IOC_CONFIGURE` with [`EVENT_HISTORIES`] |
//! | [`IOC_CAUSAL_PLAN`] | write | [`CausalPlan`]; after `IOC_CONFIGURE` with [`EVENT_SAMPLES`], before `IOC_START` |
//! | [`IOC_CAUSAL_TYPE`] | write | [`CausalType`] (+ the array of instruction addresses it points to); after `IOC_CAUSAL_PLAN`, no experiment running |
//! | [`IOC_EXPERIMENT_START`] | write | [`ExperimentControl`]; while running, no experiment running |
//! | [`IOC_EXPERIMENT_END`] | none | - ; ends the running experiment |
//! | [`IOC_CAUSAL_SCOPE`] | write | [`CausalScope`] (+ the array of ranges it points to); after `IOC_CAUSAL_PLAN`, before `IOC_START` |
//! | [`IOC_PAGE_SITES`] | write | [`PageSites`] (+ the two arrays of ranges it points to); after `IOC_CONFIGURE` with `EVENT_SLAB`, before `IOC_START` |
//!
//! # Causal experiments and progress points
//! A causal session is a sampling session with a [`CausalPlan`] (its progress points) and a
//! table of [`CausalType`]s. Each experiment virtually speeds up one type's accesses: every
//! sample that the O(1) type test puts on that type adds `speedup x sample weight` of delay
//! that every other CPU must serve (Coz's rule), and `IOC_EXPERIMENT_END` writes an
//! [`ExperimentEnd`] with the experiment's wall time, inserted delay and progress visits.
//!
//! User programs signal a `user` progress point by writing its name to `/dev/dprof` through
//! a write-only open, which the exclusive collector does not block:
//! ```text
//! fd = open("/dev/dprof", O_WRONLY);
//! write(fd, "requests", 8);    // ENOENT: no running causal session has a user point of that name
//! ```
//!
//! A session, from user space (error handling left out):
//! ```text
//! fd = open("/dev/dprof", O_RDONLY);              // EBUSY if another collector has it
//! ioctl(fd, IOC_VERSION, &version);               // check abi_version == ABI_VERSION
//! ioctl(fd, IOC_CONFIGURE, &config);              // events, ring size per CPU
//! ioctl(fd, IOC_HISTORY_PLAN, &plan);             // only with EVENT_HISTORIES
//! ioctl(fd, IOC_START);
//! loop { n = read(fd, buf, len); ... }            // whole records; EAGAIN when empty
//! ioctl(fd, IOC_STOP);
//! while ((n = read(fd, buf, len)) > 0) { ... }    // drain; 0 once stopped and empty
//! close(fd);
//! ```

//!
//! # Layouts
//! Each structure below is one `wire!` invocation: its fields in wire order, from which the
//! macro derives the Rust struct, every field's offset, `SIZE`, the encoder and the decoder,
//! and checks at compile time that the fields add up to the size written next to the name and
//! that every field is naturally aligned (the layout is the C layout with explicit padding).

use core::marker::PhantomData;

/// Version of this ABI; bumped on any incompatible change.
pub const ABI_VERSION: u32 = 9;
/// Path of the device the module creates.
pub const DEVICE_PATH: &str = "/dev/dprof";
/// Every record size is a multiple of this.
pub const RECORD_ALIGN: usize = 8;
/// Size of [`RecordHeader`] on the wire.
pub const RECORD_HEADER_SIZE: usize = 16;
/// Smallest per-CPU ring the module accepts.
pub const MIN_RING_BYTES: u32 = 64 * 1024;
/// Largest per-CPU ring the module accepts.
pub const MAX_RING_BYTES: u32 = 256 * 1024 * 1024;
/// Per-CPU ring size used when the collector does not say otherwise.
pub const DEFAULT_RING_BYTES: u32 = 4 * 1024 * 1024;
/// Bytes of a cache name kept in [`CacheInfo`] (NUL-padded; longer names are cut).
pub const CACHE_NAME_BYTES: usize = 48;

/// Why bytes could not be decoded as an ABI structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AbiError {
    /// Fewer bytes than the structure needs.
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// The record kind is not one this ABI version defines.
    UnknownKind(u16),
    /// The header's size does not match the size of its kind.
    WrongSize {
        /// Kind from the header.
        kind: u16,
        /// Size from the header.
        size: u16,
        /// Size this kind has.
        expected: u16,
    },
    /// A field that must be zero (reserved, padding) is not.
    NonZeroReserved,
    /// A field holds a value outside its range.
    OutOfRange,
}

impl core::fmt::Display for AbiError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Self::Truncated { needed, available } => {
                write!(f, "truncated: needs {needed} bytes, {available} available")
            }
            Self::UnknownKind(kind) => write!(f, "unknown record kind {kind}"),
            Self::WrongSize {
                kind,
                size,
                expected,
            } => write!(
                f,
                "record of kind {kind} has size {size}, expected {expected}"
            ),
            Self::NonZeroReserved => write!(f, "a reserved field is not zero"),
            Self::OutOfRange => write!(f, "a field is out of range"),
        }
    }
}

impl core::error::Error for AbiError {}

// ---------------------------------------------------------------------------------------------
// The encoding: `Wire` for scalars and arrays, `wire!` for structures

/// A value with a fixed little-endian encoding. Buffers handed to `put`, `get` and
/// `reserved_zero` hold at least `SIZE` bytes, of which the value uses the first `SIZE`; the
/// callers pass slices of constant bounds, so that the compiler sees every index in bounds.
trait Wire: Sized {
    /// Bytes on the wire.
    const SIZE: usize;
    /// Alignment it is kept at on the wire: a scalar's size, a structure's largest field's.
    const ALIGN: usize;
    /// Encodes the value, reserved bytes zero.
    fn put(&self, out: &mut [u8]);
    /// Decodes a value, checking nothing.
    fn get(buf: &[u8]) -> Self;
    /// Overwrites the fields on the wire with a decoded value, in place.
    fn fill(&mut self, buf: &[u8]) {
        *self = Self::get(buf);
    }
    /// Whether the reserved bytes (those of `_` fields) are zero.
    fn reserved_zero(_buf: &[u8]) -> bool {
        true
    }
}

macro_rules! wire_scalars {
    ($($t:ty),*) => {$(
        impl Wire for $t {
            const SIZE: usize = core::mem::size_of::<$t>();
            const ALIGN: usize = core::mem::size_of::<$t>();
            #[inline]
            fn put(&self, out: &mut [u8]) {
                out[..Self::SIZE].copy_from_slice(&self.to_le_bytes());
            }
            #[inline]
            fn get(buf: &[u8]) -> Self {
                let mut bytes = [0; core::mem::size_of::<$t>()];
                bytes.copy_from_slice(&buf[..Self::SIZE]);
                Self::from_le_bytes(bytes)
            }
        }
    )*};
}
wire_scalars!(u8, u16, u32, u64, i32);

/// Arrays are their elements one after the other.
impl<T: Wire, const N: usize> Wire for [T; N] {
    const SIZE: usize = N * T::SIZE;
    const ALIGN: usize = T::ALIGN;
    // Indexes rather than `chunks_exact`, whose division by a chunk size the compiler cannot
    // see is non-zero leaves a panic path that the kernel's objtool warns about.
    #[inline]
    fn put(&self, out: &mut [u8]) {
        for (i, value) in self.iter().enumerate() {
            value.put(&mut out[i * T::SIZE..(i + 1) * T::SIZE]);
        }
    }
    #[inline]
    fn get(buf: &[u8]) -> Self {
        core::array::from_fn(|i| T::get(&buf[i * T::SIZE..(i + 1) * T::SIZE]))
    }
    #[inline]
    fn reserved_zero(buf: &[u8]) -> bool {
        (0..N).all(|i| T::reserved_zero(&buf[i * T::SIZE..(i + 1) * T::SIZE]))
    }
}

/// Where a field of type `T` lies in the wire bytes of its structure.
struct Field<T> {
    offset: usize,
    _type: PhantomData<T>,
}

impl<T: Wire> Field<T> {
    const fn at(offset: usize) -> Self {
        Self {
            offset,
            _type: PhantomData,
        }
    }

    /// The offset just past the field.
    const fn end(&self) -> usize {
        self.offset + T::SIZE
    }

    /// The field's bytes in `buf`, the wire bytes of its structure.
    #[inline]
    fn bytes<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        &buf[self.offset..self.end()]
    }

    #[inline]
    fn read(&self, buf: &[u8]) -> T {
        T::get(self.bytes(buf))
    }

    #[inline]
    fn write(&self, out: &mut [u8], value: &T) {
        value.put(&mut out[self.offset..self.end()]);
    }
}

/// The wire fields of structure `R`: associated constants named like its fields, each a
/// [`Field`] (`Fields::<Alloc>::node` is the `Field<i32>` at offset 36). `wire!` defines them.
struct Fields<R>(PhantomData<R>);

const fn max(a: usize, b: usize) -> usize {
    if a > b {
        a
    } else {
        b
    }
}

/// The first `T::SIZE` bytes of `buf`, checked to be there and to have zero reserved bytes.
#[inline]
fn wire_bytes<T: Wire>(buf: &[u8]) -> Result<&[u8], AbiError> {
    let Some(buf) = buf.get(..T::SIZE) else {
        return Err(AbiError::Truncated {
            needed: T::SIZE,
            available: buf.len(),
        });
    };
    if T::reserved_zero(buf) {
        Ok(buf)
    } else {
        Err(AbiError::NonZeroReserved)
    }
}

/// Defines a structure on the wire from its fields, in wire order:
///
/// ```text
/// wire! {
///     /// Docs and attributes of the struct.
///     pub struct Name(DOCUMENTED_SIZE) {
///         /// Docs of a field.
///         pub field: u64,      // a scalar, an array or another `wire!` structure
///         _: u32,              // reserved: written as zero, decoding checks it is zero
///         pub extra: T = expr, // not on the wire: decoding sets it to `expr`
///     }
///     encode;                  // optional: `pub fn encode(&self, &mut [u8; SIZE])`
///     /// What `check` refuses (appended to the docs' `# Errors`).
///     decode, check;           // optional: `pub fn decode(&[u8]) -> Result<Self, AbiError>`,
///                              // which calls `self.check()?` when one is named
///     default;                 // optional: `Default` as the all-zero bytes, for a struct
/// }                            // that cannot derive it (arrays over 32 elements)
/// ```
///
/// Offsets are sums of the sizes before each field, constants of `Fields::<Name>`. Compile-time
/// checks: the sizes add up to `DOCUMENTED_SIZE`, and each field lies at a multiple of its
/// alignment, as does the end.
macro_rules! wire {
    // Fields, one at a time, into three lists: wire fields with their offsets, reserved fields
    // with theirs, and fields not on the wire.
    (@field $name:ident $head:tt $wire:tt [$($reserved:tt)*] $extra:tt ($off:expr)
        $(#[$doc:meta])* _: $ty:ty $(, $($rest:tt)*)?
    ) => {
        wire!(@field $name $head $wire [$($reserved)* [$ty = $off]] $extra
            ($off + <$ty as Wire>::SIZE) $($($rest)*)?);
    };
    (@field $name:ident $head:tt $wire:tt $reserved:tt [$($extra:tt)*] ($off:expr)
        $(#[$doc:meta])* $vis:vis $field:ident: $ty:ty = $init:expr $(, $($rest:tt)*)?
    ) => {
        wire!(@field $name $head $wire $reserved [$($extra)* [$(#[$doc])* $vis $field: $ty = $init]]
            ($off) $($($rest)*)?);
    };
    (@field $name:ident $head:tt [$($wire:tt)*] $reserved:tt $extra:tt ($off:expr)
        $(#[$doc:meta])* $vis:vis $field:ident: $ty:ty $(, $($rest:tt)*)?
    ) => {
        wire!(@field $name $head [$($wire)* [$(#[$doc])* $vis $field: $ty = $off]] $reserved $extra
            (Fields::<$name>::$field.end()) $($($rest)*)?);
    };
    // All fields seen: the definitions.
    (@field $name:ident [($size:expr) $(#[$meta:meta])* $vis:vis]
        [$([$(#[$doc:meta])* $fvis:vis $field:ident: $ty:ty = $off:expr])*]
        [$([$rty:ty = $roff:expr])*]
        [$([$(#[$edoc:meta])* $evis:vis $efield:ident: $ety:ty = $init:expr])*]
        ($end:expr)
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $($(#[$doc])* $fvis $field: $ty,)*
            $($(#[$edoc])* $evis $efield: $ety,)*
        }

        #[expect(non_upper_case_globals, reason = "the offsets are named like their fields")]
        impl Fields<$name> {
            $(const $field: Field<$ty> = Field::at($off);)*
        }

        impl $name {
            /// Size on the wire.
            pub const SIZE: usize = $end;
        }

        impl Wire for $name {
            const SIZE: usize = $end;
            const ALIGN: usize = {
                let align = 1;
                $(let align = max(align, <$ty as Wire>::ALIGN);)*
                $(let align = max(align, <$rty as Wire>::ALIGN);)*
                align
            };
            #[inline]
            fn put(&self, out: &mut [u8]) {
                // One bounds check here, which the compiler then knows every field is within.
                let out = &mut out[..Self::SIZE];
                $(Fields::<Self>::$field.write(out, &self.$field);)*
                $(const { Field::<$rty>::at($roff) }.write(out, &0);)*
            }
            #[inline]
            fn get(buf: &[u8]) -> Self {
                let buf = &buf[..Self::SIZE];
                Self {
                    $($field: Fields::<Self>::$field.read(buf),)*
                    $($efield: $init,)*
                }
            }
            #[inline]
            fn fill(&mut self, buf: &[u8]) {
                let buf = &buf[..Self::SIZE];
                $(self.$field = Fields::<Self>::$field.read(buf);)*
            }
            #[inline]
            fn reserved_zero(buf: &[u8]) -> bool {
                let buf = &buf[..Self::SIZE];
                $(const { Field::<$rty>::at($roff) }.read(buf) == 0 &&)*
                $(<$ty as Wire>::reserved_zero(Fields::<Self>::$field.bytes(buf)) &&)*
                true
            }
        }

        const _: () = {
            assert!(
                $name::SIZE == $size,
                concat!(stringify!($name), ": the fields do not add up to its size")
            );
            assert!($name::SIZE.is_multiple_of(<$name as Wire>::ALIGN));
            $(assert!(
                Fields::<$name>::$field.offset.is_multiple_of(<$ty as Wire>::ALIGN),
                concat!(stringify!($name), ".", stringify!($field), " is misaligned")
            );)*
            $(assert!(
                ($roff).is_multiple_of(<$rty as Wire>::ALIGN),
                concat!(stringify!($name), ": a reserved field is misaligned")
            );)*
        };
    };

    // After the struct: `encode;`, `decode;` (or `decode, check;`) and `default;`.
    (@tail $name:ident) => {};
    (@tail $name:ident encode; $($rest:tt)*) => {
        impl $name {
            /// Encodes the structure into its wire bytes (reserved bytes zero).
            pub fn encode(&self, out: &mut [u8; Self::SIZE]) {
                Wire::put(self, out);
            }
        }
        wire!(@tail $name $($rest)*);
    };
    (@tail $name:ident $(#[$errors:meta])* decode $(, $check:ident)?; $($rest:tt)*) => {
        impl $name {
            /// Decodes the structure from the start of `buf`.
            ///
            /// # Errors
            /// [`AbiError::Truncated`] when `buf` is shorter than [`SIZE`](Self::SIZE);
            /// [`AbiError::NonZeroReserved`] when reserved bytes (padding), if any, are not zero.
            $(#[$errors])*
            pub fn decode(buf: &[u8]) -> Result<Self, AbiError> {
                // Decoded straight into the result, which `check` then reads: no copy.
                let decoded = Ok(Self::get(wire_bytes::<Self>(buf)?));
                $(if let Ok(value) = &decoded {
                    value.$check()?;
                })?
                decoded
            }
        }
        wire!(@tail $name $($rest)*);
    };
    (@tail $name:ident default; $($rest:tt)*) => {
        impl Default for $name {
            /// All zero.
            fn default() -> Self {
                Self::get(&[0; Self::SIZE])
            }
        }
        wire!(@tail $name $($rest)*);
    };

    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident($size:expr) { $($fields:tt)* }
        $($tail:tt)*
    ) => {
        wire!(@field $name [($size) $(#[$meta])* $vis] [] [] [] (0) $($fields)*);
        wire!(@tail $name $($tail)*);
    };
}

/// A NUL-padded name up to its first NUL (all of it when it has none).
#[must_use]
pub fn until_nul(name: &[u8]) -> &[u8] {
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    &name[..end]
}

/// `name` NUL-padded to `N` bytes, cut to `N - 1` so that at least one NUL ends it.
fn nul_padded<const N: usize>(name: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    let kept = name.len().min(N - 1);
    out[..kept].copy_from_slice(&name[..kept]);
    out
}

fn check_len(buf: &[u8], needed: usize) -> Result<(), AbiError> {
    if buf.len() < needed {
        Err(AbiError::Truncated {
            needed,
            available: buf.len(),
        })
    } else {
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Records

/// `RecordKind` and its tables (number, name, payload size) from one row per kind, with
/// compile-time checks that every record size is aligned and fits [`MAX_RECORD_SIZE`].
macro_rules! record_kinds {
    ($($(#[$doc:meta])* $kind:ident = $number:literal, $name:literal, $size:expr;)*) => {
        /// Kinds of records.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u16)]
        pub enum RecordKind {
            $($(#[$doc])* $kind = $number,)*
        }

        impl RecordKind {
            /// The kind with this number, if this ABI version defines one.
            #[must_use]
            pub const fn from_u16(v: u16) -> Option<Self> {
                match v {
                    $($number => Some(Self::$kind),)*
                    _ => None,
                }
            }

            /// Total size (header + payload) of a record of this kind.
            #[must_use]
            pub const fn record_size(self) -> usize {
                // A table indexed by kind number: one load on the decoding path, where a
                // `match` can compile to an indirect jump.
                const LEN: usize = {
                    let mut len = 0;
                    $(len = max(len, $number + 1);)*
                    len
                };
                const SIZES: [usize; LEN] = {
                    let mut sizes = [0; LEN];
                    $(sizes[$number] = RECORD_HEADER_SIZE + $size;)*
                    sizes
                };
                SIZES[self as usize]
            }

            /// A short lower-case name, as `dprof dump` prints it.
            #[must_use]
            pub const fn name(self) -> &'static str {
                match self { $(Self::$kind => $name,)* }
            }
        }

        const _: () = {$(
            assert!(RecordKind::$kind.record_size().is_multiple_of(RECORD_ALIGN));
            assert!(RecordKind::$kind.record_size() <= MAX_RECORD_SIZE);
        )*};
    };
}

record_kinds! {
    /// A slab allocation ([`Alloc`]).
    Alloc = 1, "alloc", Alloc::SIZE;
    /// A slab free ([`Free`]).
    Free = 2, "free", Free::SIZE;
    /// A slab cache's name and geometry ([`CacheInfo`]).
    CacheInfo = 3, "cache_info", CacheInfo::SIZE;
    /// Records dropped because a ring was full ([`Lost`]).
    Lost = 4, "lost", Lost::SIZE;
    /// A sampled instruction with its machine state ([`AccessSample`]).
    AccessSample = 5, "sample", AccessSample::SIZE;
    /// An IBS op sample: an [`AccessSample`] followed by the raw IBS registers ([`IbsRegs`]).
    IbsSample = 6, "ibs_sample", AccessSample::SIZE + IbsRegs::SIZE;
    /// An object access history began: a planned object was allocated ([`HistoryStart`]).
    HistoryStart = 7, "history_start", HistoryStart::SIZE;
    /// The record's CPU pointed its debug registers at the history's object ([`HistoryArm`]).
    HistoryArm = 8, "history_arm", HistoryArm::SIZE;
    /// A watched byte range of the history's object was accessed ([`HistoryHit`]).
    HistoryHit = 9, "history_hit", HistoryHit::SIZE;
    /// An object access history ended ([`HistoryEnd`]).
    HistoryEnd = 10, "history_end", HistoryEnd::SIZE;
    /// A causal experiment began ([`ExperimentStart`]).
    ExperimentStart = 11, "experiment_start", ExperimentStart::SIZE;
    /// A causal experiment ended, with its measurements ([`ExperimentEnd`]).
    ExperimentEnd = 12, "experiment_end", ExperimentEnd::SIZE;
}

/// Largest record of this ABI version, for buffers that must hold any record.
pub const MAX_RECORD_SIZE: usize = RECORD_HEADER_SIZE + AccessSample::SIZE + IbsRegs::SIZE;

const _: () = {
    assert!(MAX_RECORD_SIZE == RecordKind::IbsSample.record_size());
    assert!(MAX_RECORD_SIZE < u16::MAX as usize);
};

wire! {
    /// The 16 bytes in front of every record.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct RecordHeader(RECORD_HEADER_SIZE) {
        /// A [`RecordKind`] number.
        pub kind: u16,
        /// Total record size in bytes, header included; a multiple of [`RECORD_ALIGN`].
        pub size: u16,
        /// CPU whose ring the record was written to.
        pub cpu: u32,
        /// Nanoseconds on the kernel's monotonic fast clock.
        pub time_ns: u64,
    }
    encode;
    decode;
}

impl RecordHeader {
    /// Checks that the kind is known and the size is the size of that kind.
    ///
    /// # Errors
    /// [`AbiError::UnknownKind`] or [`AbiError::WrongSize`].
    pub fn validate(&self) -> Result<RecordKind, AbiError> {
        let kind = RecordKind::from_u16(self.kind).ok_or(AbiError::UnknownKind(self.kind))?;
        let expected = kind.record_size();
        if usize::from(self.size) == expected {
            Ok(kind)
        } else {
            Err(AbiError::WrongSize {
                kind: self.kind,
                size: self.size,
                // Every record size is far below u16::MAX (asserted above).
                expected: expected as u16,
            })
        }
    }

    /// The payload of the record this header starts in `buf`.
    fn payload<'a>(&self, buf: &'a [u8]) -> Result<&'a [u8], AbiError> {
        let size = usize::from(self.size);
        check_len(buf, size)?;
        Ok(&buf[RECORD_HEADER_SIZE..size])
    }
}

/// `Alloc.flags`: the allocation came through the `kmalloc` tracepoint (a generic cache, or a
/// large allocation straight from the page allocator when `cache` is 0).
pub const ALLOC_KMALLOC: u32 = 1;
/// `Alloc.flags`: one object of a bulk allocation (`kmem_cache_alloc_bulk`), which fires no
/// tracepoint: the module probes it.
pub const ALLOC_BULK: u32 = 2;
/// `Alloc.flags`: pages from the page allocator (`kmem:mm_page_alloc`), `bytes_alloc` bytes
/// of the direct map at `ptr`, `cache` 0. `call_site` is the first caller outside the page
/// allocator; pages that become slabs or large kmallocs are left to those events.
pub const ALLOC_PAGES: u32 = 4;

wire! {
    /// A slab allocation, from the `kmem_cache_alloc` or `kmalloc` tracepoint.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct Alloc(48) {
        /// Address of the new object.
        pub ptr: u64,
        /// Return address into the allocating function.
        pub call_site: u64,
        /// The `struct kmem_cache` it came from (an identifier, see [`CacheInfo`]); 0 when the
        /// memory did not come from a slab (large kmalloc).
        pub cache: u64,
        /// Bytes the caller asked for (`object_size` of the cache for `kmem_cache_alloc`).
        pub bytes_req: u32,
        /// Bytes the allocator handed out.
        pub bytes_alloc: u32,
        /// gfp flags of the allocation.
        pub gfp: u32,
        /// NUMA node asked for (-1: any).
        pub node: i32,
        /// `ALLOC_*` flags.
        pub flags: u32,
        _: u32,
    }
    encode;
    decode;
}

/// `Free.flags`: the free came through the `kfree` tracepoint.
pub const FREE_KFREE: u32 = 1;
/// `Free.flags`: a bulk free (`kmem_cache_free_bulk`, `kfree_bulk`), which fires no
/// tracepoint: the module probes it.
pub const FREE_BULK: u32 = 2;
/// `Free.flags`: pages given back to the page allocator (`kmem:mm_page_free`), recorded only
/// for pages whose allocation was recorded with [`ALLOC_PAGES`].
pub const FREE_PAGES: u32 = 4;

wire! {
    /// A slab free, from the `kfree` or `kmem_cache_free` tracepoint (they fire before the
    /// object is released).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct Free(32) {
        /// Address of the object.
        pub ptr: u64,
        /// Return address into the freeing function.
        pub call_site: u64,
        /// The cache it belongs to; 0 when not a slab object.
        pub cache: u64,
        /// `FREE_*` flags.
        pub flags: u32,
        _: u32,
    }
    encode;
    decode;
}

/// `CacheInfo.origin`: found by walking the kernel's list of caches when collection started.
pub const CACHE_ORIGIN_WALK: u16 = 0;
/// `CacheInfo.origin`: first seen in an allocation or free during collection.
pub const CACHE_ORIGIN_SEEN: u16 = 1;

wire! {
    /// A slab cache: written once for every cache that exists when collection starts and the
    /// first time a cache is seen in an allocation or free.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct CacheInfo(80) {
        /// The `struct kmem_cache` address: the identifier [`Alloc::cache`] and [`Free::cache`]
        /// use.
        pub cache: u64,
        /// Size of the objects the cache was created for.
        pub object_size: u32,
        /// Size of a slot, metadata and padding included.
        pub size: u32,
        /// Alignment of the objects.
        pub align: u32,
        /// The cache's `SLAB_*` flags.
        pub slab_flags: u32,
        /// Full length of the name; more than [`CACHE_NAME_BYTES`] - 1 means `name` was cut.
        pub name_len: u16,
        /// `CACHE_ORIGIN_*`.
        pub origin: u16,
        /// Name, NUL-padded.
        pub name: [u8; CACHE_NAME_BYTES],
        _: u32,
    }
    encode;
    /// [`AbiError::OutOfRange`] for an unknown origin.
    decode, check;
}

impl CacheInfo {
    /// A cache info with `name` copied in (cut to [`CACHE_NAME_BYTES`] - 1 bytes).
    #[must_use]
    pub fn with_name(mut self, name: &[u8]) -> Self {
        self.name = nul_padded(name);
        self.name_len = u16::try_from(name.len()).unwrap_or(u16::MAX);
        self
    }

    /// The stored name bytes, up to the first NUL.
    #[must_use]
    pub fn name_bytes(&self) -> &[u8] {
        until_nul(&self.name)
    }

    fn check(&self) -> Result<(), AbiError> {
        if self.origin > CACHE_ORIGIN_SEEN {
            return Err(AbiError::OutOfRange);
        }
        Ok(())
    }
}

wire! {
    /// Records a CPU's ring could not take because it was full, since the last such record.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct Lost(8) {
        /// Number of records dropped.
        pub count: u64,
    }
    encode;
    decode;
}

/// Number of general-purpose registers in [`AccessSample::regs`].
pub const SAMPLE_REGS: usize = 16;
/// Instruction bytes kept in [`AccessSample::insn`] (the longest x86 instruction is 15).
pub const SAMPLE_INSN_BYTES: usize = 16;
/// Index in [`AccessSample::regs`] of each register, in the hardware encoding order (the
/// ModRM/SIB register numbers), so that decoders can index by register number.
pub mod reg {
    /// %rax
    pub const RAX: usize = 0;
    /// %rcx
    pub const RCX: usize = 1;
    /// %rdx
    pub const RDX: usize = 2;
    /// %rbx
    pub const RBX: usize = 3;
    /// %rsp
    pub const RSP: usize = 4;
    /// %rbp
    pub const RBP: usize = 5;
    /// %rsi
    pub const RSI: usize = 6;
    /// %rdi
    pub const RDI: usize = 7;
    /// %r8; %r9..%r15 follow.
    pub const R8: usize = 8;
    /// %r15
    pub const R15: usize = 15;
}

/// `AccessSample.sampler`: the software cpu-clock sampler (no data address; registers and
/// instruction bytes instead).
pub const SAMPLER_KIND_SOFTWARE: u8 = 1;
/// `AccessSample.sampler`: AMD IBS op.
pub const SAMPLER_KIND_IBS: u8 = 2;
/// `AccessSample.sampler`: Intel PEBS load latency.
pub const SAMPLER_KIND_PEBS: u8 = 3;

/// `AccessSample.flags`: the sampled instruction ran in user mode.
pub const SAMPLE_USER: u8 = 1;

/// `AccessSample.hw_valid` bit: `data_addr` holds the accessed virtual address.
pub const HW_DATA_ADDR: u32 = 1;
/// `AccessSample.hw_valid` bit: `phys_addr` holds the accessed physical address.
pub const HW_PHYS_ADDR: u32 = 2;
/// `AccessSample.hw_valid` bit: `data_src` holds perf's `perf_mem_data_src`.
pub const HW_DATA_SRC: u32 = 4;
/// `AccessSample.hw_valid` bit: `latency` holds the access latency in cycles.
pub const HW_LATENCY: u32 = 8;
/// `AccessSample.hw_valid` bit: `hw_flags` holds `HWF_*` bits.
pub const HW_FLAGS: u32 = 16;

wire! {
    /// A sampled instruction and the machine state needed to find the data it touched.
    ///
    /// The software sampler fills the registers, `gs_base` and the instruction bytes; userland
    /// decodes the instruction and computes the effective address. Hardware samplers also
    /// fill the `hw_*` fields and say which in `hw_valid`; without a bit, the field is absent.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct AccessSample(208) {
        /// Instruction pointer of the sampled instruction.
        pub ip: u64,
        /// General-purpose registers at the sample, indexed by [`reg`].
        pub regs: [u64; SAMPLE_REGS],
        /// Base of the %gs segment: the CPU's per-CPU area in kernel mode.
        pub gs_base: u64,
        /// Thread group id of the interrupted task (0: none, e.g. idle).
        pub pid: u32,
        /// Thread id of the interrupted task.
        pub tid: u32,
        /// Instruction bytes at `ip`; the first `insn_len` are valid.
        pub insn: [u8; SAMPLE_INSN_BYTES],
        /// Valid bytes of `insn` (0 when `ip` could not be read).
        pub insn_len: u8,
        /// `SAMPLE_*` flags.
        pub flags: u8,
        /// `SAMPLER_KIND_*` that took the sample.
        pub sampler: u8,
        _: u8,
        /// `HW_*` bits: which of the fields below are present.
        pub hw_valid: u32,
        /// Data virtual address (`HW_DATA_ADDR`).
        pub data_addr: u64,
        /// Data physical address (`HW_PHYS_ADDR`).
        pub phys_addr: u64,
        /// perf data source (`HW_DATA_SRC`).
        pub data_src: u64,
        /// Latency in cycles (`HW_LATENCY`).
        pub latency: u32,
        /// Miss/hit flags (`HW_FLAGS`): `HWF_*` bits.
        pub hw_flags: u32,
        /// The raw IBS op registers, for IBS samples only (record kind
        /// [`RecordKind::IbsSample`]). Not in this payload: they follow it.
        pub ibs: Option<IbsRegs> = None,
    }
    encode;
}

impl AccessSample {
    /// The valid instruction bytes.
    #[must_use]
    pub fn insn_bytes(&self) -> &[u8] {
        &self.insn[..usize::from(self.insn_len).min(SAMPLE_INSN_BYTES)]
    }

    /// Decodes the payload (`ibs` is `None`: the registers are not in it).
    ///
    /// # Errors
    /// [`AbiError::Truncated`], [`AbiError::NonZeroReserved`] for non-zero padding,
    /// [`AbiError::OutOfRange`] for an instruction length over 16 or an unknown sampler.
    pub fn decode(buf: &[u8]) -> Result<Self, AbiError> {
        Self::check(buf)?;
        Ok(Self::get(buf))
    }

    /// Checks a payload as [`AccessSample::decode`] does, reading only the fields checked.
    fn check(buf: &[u8]) -> Result<(), AbiError> {
        check_len(buf, Self::SIZE)?;
        if !Self::reserved_zero(buf) {
            return Err(AbiError::NonZeroReserved);
        }
        let insn_len = Fields::<Self>::insn_len.read(buf);
        let sampler = Fields::<Self>::sampler.read(buf);
        if usize::from(insn_len) > SAMPLE_INSN_BYTES
            || !(SAMPLER_KIND_SOFTWARE..=SAMPLER_KIND_PEBS).contains(&sampler)
        {
            return Err(AbiError::OutOfRange);
        }
        Ok(())
    }
}

/// An access sample read in place from a checked record: what [`Record::decode_view`] gives
/// for sample records, so that a reader of millions of samples reads only the fields it needs
/// (the instruction, a register or two) instead of copying the whole sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccessSampleView<'a> {
    payload: &'a [u8; AccessSample::SIZE],
    /// The IBS registers' payload, checked; empty for other samplers.
    ibs: &'a [u8],
}

impl<'a> AccessSampleView<'a> {
    /// Checks a sample payload (and, for an IBS sample, its registers) as
    /// [`Record::decode_into`] does.
    fn new(kind: RecordKind, payload: &'a [u8]) -> Result<Self, AbiError> {
        check_len(payload, AccessSample::SIZE)?;
        let (sample, regs) = payload.split_at(AccessSample::SIZE);
        AccessSample::check(sample)?;
        let ibs = kind == RecordKind::IbsSample;
        // IBS samples always carry their registers, and only they do.
        if (Fields::<AccessSample>::sampler.read(sample) == SAMPLER_KIND_IBS) != ibs {
            return Err(AbiError::OutOfRange);
        }
        let ibs = if ibs {
            IbsRegs::decode(regs)?;
            regs
        } else {
            &[]
        };
        let payload = sample.try_into().map_err(|_| AbiError::Truncated {
            needed: AccessSample::SIZE,
            available: sample.len(),
        })?;
        Ok(Self { payload, ibs })
    }

    /// See [`AccessSample::ip`].
    #[must_use]
    pub fn ip(&self) -> u64 {
        Fields::<AccessSample>::ip.read(self.payload)
    }

    /// Register `index` (see [`reg`]); 0 past the last.
    #[must_use]
    pub fn reg(&self, index: usize) -> u64 {
        if index < SAMPLE_REGS {
            u64::get(&self.payload[Fields::<AccessSample>::regs.offset + 8 * index..])
        } else {
            0
        }
    }

    /// See [`AccessSample::gs_base`].
    #[must_use]
    pub fn gs_base(&self) -> u64 {
        Fields::<AccessSample>::gs_base.read(self.payload)
    }

    /// See [`AccessSample::insn`].
    #[must_use]
    pub fn insn(&self) -> [u8; SAMPLE_INSN_BYTES] {
        Fields::<AccessSample>::insn.read(self.payload)
    }

    /// See [`AccessSample::insn_len`].
    #[must_use]
    pub fn insn_len(&self) -> u8 {
        Fields::<AccessSample>::insn_len.read(self.payload)
    }

    /// See [`AccessSample::flags`].
    #[must_use]
    pub fn flags(&self) -> u8 {
        Fields::<AccessSample>::flags.read(self.payload)
    }

    /// See [`AccessSample::sampler`].
    #[must_use]
    pub fn sampler(&self) -> u8 {
        Fields::<AccessSample>::sampler.read(self.payload)
    }

    /// See [`AccessSample::pid`].
    #[must_use]
    pub fn pid(&self) -> u32 {
        Fields::<AccessSample>::pid.read(self.payload)
    }

    /// The whole sample, copied.
    #[must_use]
    pub fn to_sample(&self) -> AccessSample {
        let mut sample = AccessSample::default();
        self.copy_to(&mut sample);
        sample
    }

    /// Overwrites `sample` with this one, in place.
    fn copy_to(&self, sample: &mut AccessSample) {
        sample.fill(self.payload);
        // Checked by `new`.
        sample.ibs = (!self.ibs.is_empty()).then(|| IbsRegs::get(self.ibs));
    }
}

/// A record as [`Record::decode_view`] gives it.
#[derive(Clone, Copy, Debug)]
pub enum RecordView<'a> {
    /// An access sample (IBS or not), read in place.
    AccessSample(AccessSampleView<'a>),
    /// Any other record, decoded.
    Decoded(&'a Record),
}

/// Index in [`IbsRegs::regs`]: `IbsOpCtl` (MSR 0xC0011033).
pub const IBS_OP_CTL: usize = 0;
/// Index in [`IbsRegs::regs`]: `IbsOpRip`.
pub const IBS_OP_RIP: usize = 1;
/// Index in [`IbsRegs::regs`]: `IbsOpData`.
pub const IBS_OP_DATA: usize = 2;
/// Index in [`IbsRegs::regs`]: `IbsOpData2`.
pub const IBS_OP_DATA2: usize = 3;
/// Index in [`IbsRegs::regs`]: `IbsOpData3`.
pub const IBS_OP_DATA3: usize = 4;
/// Index in [`IbsRegs::regs`]: `IbsDcLinAd`.
pub const IBS_DC_LIN_AD: usize = 5;
/// Index in [`IbsRegs::regs`]: `IbsDcPhysAd`.
pub const IBS_DC_PHYS_AD: usize = 6;
/// Index in [`IbsRegs::regs`]: `IbsBrTarget` (present with caps bit [`IBS_CAPS_BRNTRGT`]).
pub const IBS_BR_TARGET: usize = 7;
/// Index in [`IbsRegs::regs`]: `IbsOpData4` (present with caps bit [`IBS_CAPS_OPDATA4`]).
pub const IBS_OP_DATA4: usize = 8;
/// `IbsRegs::caps` bit (`IBS_CAPS_BRNTRGT` in the kernel): `IbsBrTarget` exists.
pub const IBS_CAPS_BRNTRGT: u32 = 1 << 5;
/// `IbsRegs::caps` bit (`IBS_CAPS_OPDATA4` in the kernel): `IbsOpData4` exists.
pub const IBS_CAPS_OPDATA4: u32 = 1 << 10;

wire! {
    /// The raw IBS op registers of one sample, as perf read them (`PERF_SAMPLE_RAW`). The
    /// kernel's blob leaves out the registers the CPU lacks; here every register has a fixed
    /// index and an absent one (see `caps`) is zero, so that the record has one size.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct IbsRegs(80) {
        /// The kernel's `ibs_caps` (CPUID `Fn8000_001B` EAX) when the sample was taken.
        pub caps: u32,
        _: u32,
        /// The registers, indexed by `IBS_OP_CTL` ... `IBS_OP_DATA4`.
        pub regs: [u64; 9],
    }
    encode;
    /// [`AbiError::NonZeroReserved`] also for a register the caps say is absent.
    decode, check;
}

impl IbsRegs {
    fn check(&self) -> Result<(), AbiError> {
        let absent_set =
            (0..self.regs.len()).any(|i| !Self::present(self.caps, i) && self.regs[i] != 0);
        if absent_set {
            return Err(AbiError::NonZeroReserved);
        }
        Ok(())
    }

    /// Whether a CPU with these `caps` has the register at `index` (`IbsBrTarget` and
    /// `IbsOpData4` are optional; the others always exist).
    #[must_use]
    pub const fn present(caps: u32, index: usize) -> bool {
        match index {
            IBS_BR_TARGET => caps & IBS_CAPS_BRNTRGT != 0,
            IBS_OP_DATA4 => caps & IBS_CAPS_OPDATA4 != 0,
            _ => true,
        }
    }
    /// The registers in the kernel's `PERF_SAMPLE_RAW` layout: `u32 caps`, then the registers
    /// present, little-endian. Returns the number of bytes written to `out`.
    pub fn to_perf_raw(&self, out: &mut [u8; PERF_RAW_MAX]) -> usize {
        out[..4].copy_from_slice(&self.caps.to_le_bytes());
        let mut at = 4;
        for (i, r) in self.regs.iter().enumerate() {
            if Self::present(self.caps, i) {
                out[at..at + 8].copy_from_slice(&r.to_le_bytes());
                at += 8;
            }
        }
        at
    }

    /// The registers from the kernel's `PERF_SAMPLE_RAW` layout (as `perf_ibs_handle_irq`
    /// writes it), spread onto fixed indexes; `None` when `raw` is shorter than its caps
    /// promise. Bytes after the registers are ignored.
    #[must_use]
    pub fn from_perf_raw(raw: &[u8]) -> Option<Self> {
        let caps = u32::from_le_bytes(raw.get(..4)?.try_into().ok()?);
        let mut out = Self { caps, regs: [0; 9] };
        let mut at = 4;
        for (i, reg) in out.regs.iter_mut().enumerate() {
            if Self::present(caps, i) {
                *reg = u64::from_le_bytes(raw.get(at..at + 8)?.try_into().ok()?);
                at += 8;
            }
        }
        Some(out)
    }
}

/// Largest `PERF_SAMPLE_RAW` blob of an IBS op sample: `u32 caps` and nine registers.
pub const PERF_RAW_MAX: usize = 4 + 8 * 9;

// ---------------------------------------------------------------------------------------------
// Object access histories (debug registers)

/// Byte ranges one history watches at most, one per x86 debug register: one range, a pair
/// that orders two fields, or four chunks of a whole-object plan (whose histories order every
/// pair of their chunks at once).
pub const HISTORY_RANGES: usize = 4;

wire! {
    /// A byte range of an object watched by a debug register: `len` is 1, 2, 4 or 8 and
    /// `offset` a multiple of it (the debug registers' alignment rule); `len` 0 marks an unused
    /// range.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct WatchRange(8) {
        /// Offset from the object's start.
        pub offset: u32,
        /// Bytes watched: 1, 2, 4 or 8; 0 for none.
        pub len: u32,
    }
}

impl WatchRange {
    /// True for a range a debug register can watch: a length of 1, 2, 4 or 8 and an offset
    /// aligned to it.
    #[must_use]
    pub const fn is_watchable(self) -> bool {
        matches!(self.len, 1 | 2 | 4 | 8) && self.offset.is_multiple_of(self.len)
    }

    /// True when the two ranges share a byte.
    #[must_use]
    pub const fn overlaps(self, other: WatchRange) -> bool {
        let (a, b) = (self.offset as u64, other.offset as u64);
        a < b + other.len as u64 && b < a + self.len as u64
    }
}

/// A target's or history's ranges: `used`, then unused ones (ranges past [`HISTORY_RANGES`]
/// are left out).
#[must_use]
pub fn history_ranges(used: &[WatchRange]) -> [WatchRange; HISTORY_RANGES] {
    let mut ranges = [WatchRange::default(); HISTORY_RANGES];
    for (range, &u) in ranges.iter_mut().zip(used) {
        *range = u;
    }
    ranges
}

/// Checks the ranges of a plan target or history: the used ranges first, each watchable and
/// disjoint from the others, the first always used; the unused ones after them, all zero.
const fn ranges_ok(ranges: &[WatchRange; HISTORY_RANGES]) -> bool {
    let mut i = 0;
    let mut unused_seen = false;
    while i < HISTORY_RANGES {
        let range = ranges[i];
        if range.len == 0 {
            if i == 0 || range.offset != 0 {
                return false;
            }
            unused_seen = true;
        } else {
            if unused_seen || !range.is_watchable() {
                return false;
            }
            let mut j = 0;
            while j < i {
                if ranges[j].overlaps(range) {
                    return false;
                }
                j += 1;
            }
        }
        i += 1;
    }
    true
}

wire! {
    /// A history began: an object of a planned type was allocated and the debug registers of
    /// the allocating CPU now watch its ranges (other CPUs follow: [`HistoryArm`]). Written by
    /// the allocation tracepoint probe, after the allocator has initialised the object
    /// (constructor, `__GFP_ZERO`) and before the allocating code gets the pointer.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct HistoryStart(72) {
        /// Number of the history in this session, from 1.
        pub history: u64,
        /// The object's address.
        pub object: u64,
        /// Its `struct kmem_cache`, as in [`CacheInfo::cache`].
        pub cache: u64,
        /// The allocation's call site.
        pub call_site: u64,
        /// Index of the [`HistoryPlan`] target it matched.
        pub target: u32,
        _: u32,
        /// The watched ranges, in debug-register slot order.
        pub ranges: [WatchRange; HISTORY_RANGES],
    }
    encode;
    /// [`AbiError::OutOfRange`] for a target beyond [`MAX_HISTORY_TARGETS`] or ranges a debug
    /// register cannot watch.
    decode, check;
}

impl HistoryStart {
    fn check(&self) -> Result<(), AbiError> {
        if self.target as usize >= MAX_HISTORY_TARGETS || !ranges_ok(&self.ranges) {
            return Err(AbiError::OutOfRange);
        }
        Ok(())
    }
}

wire! {
    /// The record's CPU has pointed its debug registers at history `history`'s object.
    /// Accesses on this CPU between the allocation and `delay_ns` later were not seen.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct HistoryArm(16) {
        /// The history.
        pub history: u64,
        /// Nanoseconds from the history's start to this CPU's registers watching the object.
        pub delay_ns: u64,
    }
    encode;
    decode;
}

/// `HistoryHit.flags`: the access happened in user mode (a kernel object touched through a
/// user-mode instruction cannot happen; kept so that a surprise shows).
pub const HIT_USER: u8 = 1;

wire! {
    /// A debug-register trap on a watched range: the accessing instruction has completed, so
    /// `ip` is the instruction *after* it (userland finds the accessing one by decoding the
    /// function from its start) and `regs` are the registers after it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct HistoryHit(160) {
        /// The history.
        pub history: u64,
        /// Instruction pointer at the trap: just after the accessing instruction.
        pub ip: u64,
        /// General-purpose registers at the trap, indexed by [`reg`].
        pub regs: [u64; SAMPLE_REGS],
        /// Thread group id of the accessing task.
        pub pid: u32,
        /// Thread id of the accessing task.
        pub tid: u32,
        /// Index of the watched range that was hit (into [`HistoryStart::ranges`]).
        pub range: u8,
        /// `HIT_*` flags.
        pub flags: u8,
        _: u16,
        /// Number of this hit in its history, from 0; gaps are hits dropped for lack of room.
        pub seq: u32,
    }
    encode;
    /// [`AbiError::OutOfRange`] for a range index beyond [`HISTORY_RANGES`] or unknown flags.
    decode, check;
}

impl HistoryHit {
    fn check(&self) -> Result<(), AbiError> {
        if usize::from(self.range) >= HISTORY_RANGES || self.flags & !HIT_USER != 0 {
            return Err(AbiError::OutOfRange);
        }
        Ok(())
    }
}

/// `HistoryEnd.reason`: the object was freed (a free tracepoint, which fires before the
/// allocator reuses the memory).
pub const HISTORY_END_FREED: u32 = 1;
/// `HistoryEnd.reason`: the object's address was allocated again without a traced free (bulk
/// frees have no tracepoint), so it had been freed at some unknown earlier time.
pub const HISTORY_END_REALLOCATED: u32 = 2;
/// `HistoryEnd.reason`: the object lived longer than the plan's timeout (or was freed by a
/// path without a tracepoint and never reused): the history stops there.
pub const HISTORY_END_TIMEOUT: u32 = 3;
/// `HistoryEnd.reason`: collection stopped while the object was alive.
pub const HISTORY_END_STOPPED: u32 = 4;

wire! {
    /// A history ended and every CPU's debug registers are (or are about to be: hits are
    /// ignored from now on) pointed away from the object.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct HistoryEnd(48) {
        /// The history.
        pub history: u64,
        /// The object's address.
        pub object: u64,
        /// The free's call site ([`HISTORY_END_FREED`]), else 0.
        pub call_site: u64,
        /// `HISTORY_END_*`.
        pub reason: u32,
        /// Hits recorded.
        pub hits: u32,
        /// Hits not recorded: over the plan's `max_hits`, or the ring was full.
        pub dropped_hits: u32,
        _: u32,
        /// Nanoseconds from the start to the end of the history.
        pub lifetime_ns: u64,
    }
    encode;
    /// [`AbiError::OutOfRange`] for an unknown reason.
    decode, check;
}

impl HistoryEnd {
    fn check(&self) -> Result<(), AbiError> {
        if !(HISTORY_END_FREED..=HISTORY_END_STOPPED).contains(&self.reason) {
            return Err(AbiError::OutOfRange);
        }
        Ok(())
    }
}

/// A decoded record payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// Not boxed, though samples are large: records are decoded one at a time into a local, and a
// box would need an allocator, which this no_std ABI (also built into the kernel module) avoids.
pub enum Record {
    /// See [`Alloc`].
    Alloc(Alloc),
    /// See [`Free`].
    Free(Free),
    /// See [`CacheInfo`].
    CacheInfo(CacheInfo),
    /// See [`Lost`].
    Lost(Lost),
    /// See [`AccessSample`].
    AccessSample(AccessSample),
    /// See [`HistoryStart`].
    HistoryStart(HistoryStart),
    /// See [`HistoryArm`].
    HistoryArm(HistoryArm),
    /// See [`HistoryHit`].
    HistoryHit(HistoryHit),
    /// See [`HistoryEnd`].
    HistoryEnd(HistoryEnd),
    /// See [`ExperimentStart`].
    ExperimentStart(ExperimentStart),
    /// See [`ExperimentEnd`].
    ExperimentEnd(ExperimentEnd),
}

impl Record {
    /// The kind of this record.
    #[must_use]
    pub const fn kind(&self) -> RecordKind {
        match self {
            Self::Alloc(_) => RecordKind::Alloc,
            Self::Free(_) => RecordKind::Free,
            Self::CacheInfo(_) => RecordKind::CacheInfo,
            Self::Lost(_) => RecordKind::Lost,
            Self::AccessSample(s) if s.ibs.is_some() => RecordKind::IbsSample,
            Self::AccessSample(_) => RecordKind::AccessSample,
            Self::HistoryStart(_) => RecordKind::HistoryStart,
            Self::HistoryArm(_) => RecordKind::HistoryArm,
            Self::HistoryHit(_) => RecordKind::HistoryHit,
            Self::HistoryEnd(_) => RecordKind::HistoryEnd,
            Self::ExperimentStart(_) => RecordKind::ExperimentStart,
            Self::ExperimentEnd(_) => RecordKind::ExperimentEnd,
        }
    }

    /// Encodes the whole record (header and payload) at the start of `out`; returns its size.
    pub fn encode(&self, cpu: u32, time_ns: u64, out: &mut [u8; MAX_RECORD_SIZE]) -> usize {
        let kind = self.kind();
        let size = kind.record_size();
        let (header, payload) = out[..size].split_at_mut(RECORD_HEADER_SIZE);
        RecordHeader {
            kind: kind as u16,
            // Every record size is far below u16::MAX (asserted above).
            size: size as u16,
            cpu,
            time_ns,
        }
        .put(header);
        match self {
            Self::Alloc(r) => r.put(payload),
            Self::Free(r) => r.put(payload),
            Self::CacheInfo(r) => r.put(payload),
            Self::Lost(r) => r.put(payload),
            Self::AccessSample(r) => {
                let (sample, regs) = payload.split_at_mut(AccessSample::SIZE);
                r.put(sample);
                if let Some(ibs) = &r.ibs {
                    ibs.put(regs);
                }
            }
            Self::HistoryStart(r) => r.put(payload),
            Self::HistoryArm(r) => r.put(payload),
            Self::HistoryHit(r) => r.put(payload),
            Self::HistoryEnd(r) => r.put(payload),
            Self::ExperimentStart(r) => r.put(payload),
            Self::ExperimentEnd(r) => r.put(payload),
        }
        size
    }

    /// Decodes one whole record (header and payload) from the start of `buf`.
    ///
    /// # Errors
    /// Any [`AbiError`]: the header is cut, the kind unknown, the size wrong, or the payload bad.
    pub fn decode(buf: &[u8]) -> Result<(RecordHeader, Self), AbiError> {
        let mut record = Self::Lost(Lost { count: 0 });
        let header = Self::decode_into(buf, &mut record)?;
        Ok((header, record))
    }

    /// [`Record::decode`] into `out`, which is overwritten only on success: samples are
    /// hundreds of bytes, and a reader of millions of them decodes each in place rather than
    /// moving it through `Result`s.
    ///
    /// # Errors
    /// As [`Record::decode`].
    pub fn decode_into(buf: &[u8], out: &mut Self) -> Result<RecordHeader, AbiError> {
        let header = RecordHeader::decode(buf)?;
        let kind = header.validate()?;
        let payload = header.payload(buf)?;
        match kind {
            RecordKind::Alloc => *out = Self::Alloc(Alloc::decode(payload)?),
            RecordKind::Free => *out = Self::Free(Free::decode(payload)?),
            RecordKind::CacheInfo => *out = Self::CacheInfo(CacheInfo::decode(payload)?),
            RecordKind::Lost => *out = Self::Lost(Lost::decode(payload)?),
            RecordKind::HistoryStart => *out = Self::HistoryStart(HistoryStart::decode(payload)?),
            RecordKind::HistoryArm => *out = Self::HistoryArm(HistoryArm::decode(payload)?),
            RecordKind::HistoryHit => *out = Self::HistoryHit(HistoryHit::decode(payload)?),
            RecordKind::HistoryEnd => *out = Self::HistoryEnd(HistoryEnd::decode(payload)?),
            RecordKind::ExperimentStart => {
                *out = Self::ExperimentStart(ExperimentStart::decode(payload)?);
            }
            RecordKind::ExperimentEnd => {
                *out = Self::ExperimentEnd(ExperimentEnd::decode(payload)?);
            }
            RecordKind::AccessSample | RecordKind::IbsSample => {
                // Checked before `out` changes, so that it is left alone on error.
                let view = AccessSampleView::new(kind, payload)?;
                if !matches!(out, Self::AccessSample(_)) {
                    *out = Self::AccessSample(AccessSample::default());
                }
                if let Self::AccessSample(sample) = out {
                    view.copy_to(sample);
                }
            }
        }
        Ok(header)
    }

    /// [`Record::decode_into`], except that an access sample is checked but not copied: it
    /// comes back as a view into `buf` (and `out` is left alone); other records are decoded
    /// into `out`.
    ///
    /// # Errors
    /// As [`Record::decode`].
    pub fn decode_view<'a>(
        buf: &'a [u8],
        out: &'a mut Self,
    ) -> Result<(RecordHeader, RecordView<'a>), AbiError> {
        let header = RecordHeader::decode(buf)?;
        let kind = header.validate()?;
        if matches!(kind, RecordKind::AccessSample | RecordKind::IbsSample) {
            let view = AccessSampleView::new(kind, header.payload(buf)?)?;
            return Ok((header, RecordView::AccessSample(view)));
        }
        let header = Self::decode_into(buf, out)?;
        Ok((header, RecordView::Decoded(out)))
    }
}

// ---------------------------------------------------------------------------------------------
// ioctls

/// The ioctl type byte of /dev/dprof (unused in Documentation/userspace-api/ioctl/ioctl-number.rst).
pub const IOCTL_TYPE: u32 = 0xD9;

const IOC_NONE: u32 = 0;
const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// The x86/generic `_IOC` encoding: dir:2 | size:14 | type:8 | nr:8.
#[must_use]
pub const fn ioc(dir: u32, nr: u32, size: usize) -> u32 {
    (dir << 30) | ((size as u32) << 16) | (IOCTL_TYPE << 8) | nr
}

/// Reads [`VersionInfo`].
pub const IOC_VERSION: u32 = ioc(IOC_READ, 0, VersionInfo::SIZE);
/// Writes [`Config`]; only while not collecting.
pub const IOC_CONFIGURE: u32 = ioc(IOC_WRITE, 1, Config::SIZE);
/// Starts collecting; needs a configuration.
pub const IOC_START: u32 = ioc(IOC_NONE, 2, 0);
/// Stops collecting; what is in the rings can still be read.
pub const IOC_STOP: u32 = ioc(IOC_NONE, 3, 0);
/// Reads and writes [`Status`].
pub const IOC_STATUS: u32 = ioc(IOC_READ | IOC_WRITE, 4, Status::SIZE);
/// Writes [`HistoryPlan`]: after `IOC_CONFIGURE` with [`EVENT_HISTORIES`], before
/// `IOC_START`. ENOENT when a target's cache does not exist, EINVAL when a range lies beyond
/// its objects.
pub const IOC_HISTORY_PLAN: u32 = ioc(IOC_WRITE, 5, HistoryPlan::SIZE);
/// Sets the causal session's progress points ([`CausalPlan`]).
pub const IOC_CAUSAL_PLAN: u32 = ioc(IOC_WRITE, 6, CausalPlan::SIZE);
/// Sets one entry of the causal type table ([`CausalType`]).
pub const IOC_CAUSAL_TYPE: u32 = ioc(IOC_WRITE, 7, CausalType::SIZE);
/// Starts an experiment ([`ExperimentControl`]).
pub const IOC_EXPERIMENT_START: u32 = ioc(IOC_WRITE, 8, ExperimentControl::SIZE);
/// Ends the running experiment and writes its [`ExperimentEnd`] record.
pub const IOC_EXPERIMENT_END: u32 = ioc(IOC_NONE, 9, 0);
/// Sets the causal session's scope ([`CausalScope`]): after `IOC_CAUSAL_PLAN`, before
/// `IOC_START`; a second replaces the first.
pub const IOC_CAUSAL_SCOPE: u32 = ioc(IOC_WRITE, 10, CausalScope::SIZE);
/// Sets where the page allocator's code lies ([`PageSites`]): after `IOC_CONFIGURE` with
/// [`EVENT_SLAB`], before `IOC_START`; a second replaces the first. With it, the session
/// records the page allocator's allocations and frees too ([`ALLOC_PAGES`], [`FREE_PAGES`]).
pub const IOC_PAGE_SITES: u32 = ioc(IOC_WRITE, 11, PageSites::SIZE);

/// `VersionInfo.samplers` bit: software cpu-clock sampler.
pub const SAMPLER_SOFTWARE: u32 = 1;
/// `VersionInfo.samplers` bit: AMD IBS op sampler.
pub const SAMPLER_IBS: u32 = 2;
/// `VersionInfo.samplers` bit: Intel PEBS load-latency sampler.
pub const SAMPLER_PEBS: u32 = 4;

/// `VersionInfo.features` bit: all four kmem tracepoints were found.
pub const FEATURE_SLAB_EVENTS: u32 = 1;
/// `VersionInfo.features` bit: the caches that exist at start can be listed (else only caches
/// seen during collection get a [`CacheInfo`]).
pub const FEATURE_CACHE_WALK: u32 = 2;
/// `VersionInfo.features` bit: object access histories ([`EVENT_HISTORIES`]) are available
/// (the kernel has hardware breakpoints and the kmem tracepoints were found).
pub const FEATURE_HISTORIES: u32 = 4;
/// `VersionInfo.features`: causal experiments and progress points.
pub const FEATURE_CAUSAL: u32 = 8;
/// `VersionInfo.features`: an arrival point in the causal plan ([`CausalPlan::arrival`]) and
/// the delay each of its visits inserts ([`ExperimentControl::arrival_delay_ns`]): load
/// amplification.
pub const FEATURE_ARRIVALS: u32 = 16;
/// `VersionInfo.features`: a causal scope ([`IOC_CAUSAL_SCOPE`]), whose samples outside it
/// count for their first caller inside it.
pub const FEATURE_CAUSAL_SCOPE: u32 = 32;
/// `VersionInfo.features`: the page allocator's tracepoints were found, and
/// [`IOC_PAGE_SITES`] records its allocations and frees.
pub const FEATURE_PAGE_SITES: u32 = 64;

wire! {
    /// What the module is and can do (`IOC_VERSION`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct VersionInfo(32) {
        /// [`ABI_VERSION`] of the module.
        pub abi_version: u32,
        /// `nr_cpu_ids`: CPU numbers in records are below this.
        pub nr_cpu_ids: u32,
        /// CPUs online when asked.
        pub online_cpus: u32,
        /// `SAMPLER_*` bits: the samplers this module can drive (whether the CPU has IBS or
        /// PEBS is read from sysfs by userland).
        pub samplers: u32,
        /// `FEATURE_*` bits.
        pub features: u32,
        /// Smallest ring accepted.
        pub min_ring_bytes: u32,
        /// Largest ring accepted.
        pub max_ring_bytes: u32,
        /// Largest record the module writes.
        pub max_record_size: u32,
    }
    encode;
    decode;
}

/// `Config.events` bit: slab allocations and frees, and cache infos.
pub const EVENT_SLAB: u32 = 1;
/// `Config.events` bit: access samples from the sampler named in `Config.sampler`.
pub const EVENT_SAMPLES: u32 = 2;
/// `Config.events` bit: object access histories with debug registers, following an
/// `IOC_HISTORY_PLAN`. Needs [`EVENT_SLAB`]: the slab tracepoints start and end histories.
pub const EVENT_HISTORIES: u32 = 4;
/// Every `EVENT_*` bit this ABI version defines.
pub const EVENT_ALL: u32 = EVENT_SLAB | EVENT_SAMPLES | EVENT_HISTORIES;

/// Shortest sampling period accepted (10 µs): below it the sampler's own cost dominates.
pub const MIN_SAMPLE_PERIOD_NS: u32 = 10_000;
/// Longest sampling period accepted (1 s).
pub const MAX_SAMPLE_PERIOD_NS: u32 = 1_000_000_000;
/// Sampling period used when the collector does not say otherwise (1 ms).
pub const DEFAULT_SAMPLE_PERIOD_NS: u32 = 1_000_000;
/// Shortest IBS op period accepted (ops): the hardware's smallest `MaxCnt` (0x10 ops).
pub const MIN_IBS_PERIOD: u32 = 0x10;
/// Longest IBS op period accepted (ops): 27 bits of `MaxCnt` with `OpCntExt`; CPUs without
/// that extension stop at 0xFFFF0 and the kernel refuses longer periods when the counter is
/// created.
pub const MAX_IBS_PERIOD: u32 = 0x7FF_FFF0;
/// Shortest PEBS period accepted (events): below it the PEBS assist floods the rings.
pub const MIN_PEBS_PERIOD: u32 = 1000;

wire! {
    /// A collection's configuration (`IOC_CONFIGURE`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct Config(48) {
        /// Must be [`Config::SIZE`]: catches a collector built against another layout.
        pub struct_size: u32,
        /// `EVENT_*` bits; at least one, no unknown ones.
        pub events: u32,
        /// Bytes of each per-CPU ring: a power of two within
        /// [`MIN_RING_BYTES`]..=[`MAX_RING_BYTES`].
        pub ring_bytes: u32,
        /// With [`EVENT_SAMPLES`]: a `SAMPLER_KIND_*`; else 0.
        pub sampler: u32,
        /// With [`EVENT_SAMPLES`]: the period. Software: ns, within
        /// [`MIN_SAMPLE_PERIOD_NS`]..=[`MAX_SAMPLE_PERIOD_NS`]. IBS: ops, a multiple of 16
        /// within [`MIN_IBS_PERIOD`]..=[`MAX_IBS_PERIOD`]. PEBS: events, at least
        /// [`MIN_PEBS_PERIOD`]. Else 0.
        pub sample_period_ns: u32,
        /// With [`EVENT_SAMPLES`]: 1 to sample user mode too (kernel mode always); else 0.
        pub sample_user: u32,
        /// With a hardware sampler: the perf PMU type
        /// (`/sys/bus/event_source/devices/*/type`); else 0.
        pub pmu_type: u32,
        _: u32,
        /// With a hardware sampler: `perf_event_attr.config`; else 0.
        pub pmu_config: u64,
        /// With PEBS: `perf_event_attr.config1` (the load-latency threshold); else 0.
        pub pmu_config1: u64,
    }
    encode;
    /// [`AbiError::OutOfRange`] for a wrong `struct_size`, no or unknown events, a ring size out
    /// of range, or sampler fields that the sampler (or its absence) does not allow.
    decode, check;
}

impl Config {
    fn check(&self) -> Result<(), AbiError> {
        let size_ok = self.struct_size as usize == Self::SIZE;
        let events_ok = self.events != 0
            && self.events & !EVENT_ALL == 0
            && (self.events & EVENT_HISTORIES == 0 || self.events & EVENT_SLAB != 0);
        let ring_ok = self.ring_bytes.is_power_of_two()
            && (MIN_RING_BYTES..=MAX_RING_BYTES).contains(&self.ring_bytes);
        let period = self.sample_period_ns;
        let no_pmu = self.pmu_type == 0 && self.pmu_config == 0 && self.pmu_config1 == 0;
        let sampler_ok = if self.events & EVENT_SAMPLES == 0 {
            self.sampler == 0 && period == 0 && self.sample_user == 0 && no_pmu
        } else {
            let kind = u8::try_from(self.sampler).unwrap_or(u8::MAX);
            let kind_ok = match kind {
                SAMPLER_KIND_SOFTWARE => {
                    (MIN_SAMPLE_PERIOD_NS..=MAX_SAMPLE_PERIOD_NS).contains(&period) && no_pmu
                }
                // IBS op counts ops in units of 16 (`MaxCnt` holds period >> 4); its PMU
                // takes no config1.
                SAMPLER_KIND_IBS => {
                    (MIN_IBS_PERIOD..=MAX_IBS_PERIOD).contains(&period)
                        && period.is_multiple_of(16)
                        && self.pmu_type != 0
                        && self.pmu_config1 == 0
                }
                SAMPLER_KIND_PEBS => period >= MIN_PEBS_PERIOD && self.pmu_type != 0,
                _ => false,
            };
            kind_ok && self.sample_user <= 1
        };
        if size_ok && events_ok && ring_ok && sampler_ok {
            Ok(())
        } else {
            Err(AbiError::OutOfRange)
        }
    }
}

/// Targets one [`HistoryPlan`] holds at most: every pair of 91 pairs of 8-byte chunks, four
/// chunks a target (a 1456-byte object watched whole); 384 KiB of targets.
pub const MAX_HISTORY_TARGETS: usize = 4096;
/// Most histories per second a plan may ask for: each costs IPIs to every CPU at its start and
/// end, and a trap per watched access.
pub const MAX_HISTORIES_PER_SEC: u32 = 1000;
/// Longest history timeout a plan may ask for (ms).
pub const MAX_HISTORY_TIMEOUT_MS: u32 = 600_000;
/// Most hits one history may record.
pub const MAX_HISTORY_HITS: u32 = 1 << 20;

wire! {
    /// What to watch in objects of one type: the cache by name, optionally only allocations
    /// from call sites in `[site_start, site_end)` (one function, to split a `kmalloc-N`
    /// cache), and one to [`HISTORY_RANGES`] ranges.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct HistoryTarget(96) {
        /// The cache's name, NUL-padded, as in [`CacheInfo::name`].
        pub cache_name: [u8; CACHE_NAME_BYTES],
        /// First call site accepted; with `site_end` 0: any.
        pub site_start: u64,
        /// End (exclusive) of the call sites accepted; 0: any.
        pub site_end: u64,
        /// The ranges to watch, the used ones first; the rest unused (zero).
        pub ranges: [WatchRange; HISTORY_RANGES],
    }
    encode;
    /// [`AbiError::OutOfRange`] for an empty or unpadded name, a backwards site range, or
    /// ranges a debug register cannot watch.
    decode, check;
    default;
}

impl HistoryTarget {
    /// The name without its NUL padding.
    #[must_use]
    pub fn name_bytes(&self) -> &[u8] {
        until_nul(&self.cache_name)
    }

    /// This target with `name` as its cache name (cut to [`CACHE_NAME_BYTES`] - 1 bytes).
    #[must_use]
    pub fn with_name(mut self, name: &[u8]) -> Self {
        self.cache_name = nul_padded(name);
        self
    }

    /// A usable target: a non-empty name followed only by NULs, a sane site range, ranges a
    /// debug register can watch.
    fn is_valid(&self) -> bool {
        let name = self.name_bytes();
        let padding_ok = self.cache_name[name.len()..].iter().all(|&b| b == 0);
        let sites_ok =
            (self.site_start == 0 && self.site_end == 0) || self.site_start < self.site_end;
        !name.is_empty() && padding_ok && sites_ok && ranges_ok(&self.ranges)
    }

    fn check(&self) -> Result<(), AbiError> {
        if self.is_valid() {
            Ok(())
        } else {
            Err(AbiError::OutOfRange)
        }
    }
}

wire! {
    /// Which objects to watch and how often (`IOC_HISTORY_PLAN`). The module watches one object
    /// at a time: the next allocation of a target's type after the previous history ended and
    /// the rate allows, taking targets in turn. The targets are an array in the caller's
    /// memory: a whole-object plan pairs every chunk of a type with every other, hundreds of
    /// targets, more than an ioctl argument may hold.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct HistoryPlan(32) {
        /// Must be [`HistoryPlan::SIZE`].
        pub struct_size: u32,
        /// Targets at `targets_ptr`, 1..=[`MAX_HISTORY_TARGETS`].
        pub target_count: u32,
        /// Histories started per second at most, 1..=[`MAX_HISTORIES_PER_SEC`].
        pub max_per_sec: u32,
        /// A history still running after this many ms ends with [`HISTORY_END_TIMEOUT`];
        /// 1..=[`MAX_HISTORY_TIMEOUT_MS`].
        pub timeout_ms: u32,
        /// Hits recorded per history at most, 1..=[`MAX_HISTORY_HITS`]; later ones are
        /// counted.
        pub max_hits: u32,
        _: u32,
        /// User pointer to `target_count` encoded [`HistoryTarget`]s, one after another.
        pub targets_ptr: u64,
    }
    encode;
    /// [`AbiError::OutOfRange`] for a wrong `struct_size`, a count, rate, timeout or hit limit out
    /// of range, or no target pointer.
    decode, check;
}

impl HistoryPlan {
    fn check(&self) -> Result<(), AbiError> {
        let ok = self.struct_size as usize == Self::SIZE
            && (1..=MAX_HISTORY_TARGETS).contains(&(self.target_count as usize))
            && (1..=MAX_HISTORIES_PER_SEC).contains(&self.max_per_sec)
            && (1..=MAX_HISTORY_TIMEOUT_MS).contains(&self.timeout_ms)
            && (1..=MAX_HISTORY_HITS).contains(&self.max_hits)
            && self.targets_ptr != 0;
        if ok {
            Ok(())
        } else {
            Err(AbiError::OutOfRange)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Causal experiments (virtual speedups of a data type's accesses) and progress points

/// Most progress points in one [`CausalPlan`].
pub const MAX_PROGRESS_POINTS: usize = 8;
/// Bytes of a progress point's name (NUL-padded, at least one NUL).
pub const PROGRESS_NAME_BYTES: usize = 64;
/// `ProgressPoint.kind`: a kprobe on the kernel function named `name`.
pub const PROGRESS_KPROBE: u32 = 1;
/// `ProgressPoint.kind`: the kernel tracepoint named `name` (the event name, e.g.
/// `net_dev_xmit`; a `system:` prefix is the collector's to strip).
pub const PROGRESS_TRACEPOINT: u32 = 2;
/// `ProgressPoint.kind`: user programs write `name` to `/dev/dprof`.
pub const PROGRESS_USER: u32 = 3;
/// `ProgressPoint.kind`: a sampled point (Coz's): every sampler sample whose ip lies in
/// `[start, end)` (the function `name`, resolved by the collector) is one visit.
pub const PROGRESS_SAMPLED: u32 = 4;
/// Most entries in the causal type table.
pub const MAX_CAUSAL_TYPES: usize = 32;
/// Most instruction addresses one [`CausalType`] may list.
pub const MAX_CAUSAL_TYPE_IPS: u32 = 16384;
/// Most code ranges one [`CausalScope`] may list.
pub const MAX_SCOPE_RANGES: u32 = 1 << 16;
/// Most frames of a sample's kernel call chain that the module looks through for a caller in
/// the scope.
pub const MAX_CALLER_FRAMES: usize = 32;
/// Largest virtual speedup, in percent.
pub const MAX_SPEEDUP_PERCENT: u32 = 100;
/// `CausalPlan.flags`: keep writing access samples to the rings during experiments (off:
/// experiments only count, so that long causal runs do not fill the rings).
pub const CAUSAL_RECORD_SAMPLES: u32 = 1;
/// `CausalPlan.flags`: account delays per CPU, crediting a CPU found idle, instead of per task
/// (the default: Coz's rules for threads, from the scheduler's tracepoints). Per CPU forgives a
/// task woken by a timer or an interrupt the delays it owes for the time it slept.
pub const CAUSAL_PER_CPU_DELAYS: u32 = 2;
/// `ProgressPoint.latency`: where a request of the plan's latency pair begins. A plan has one
/// such point and one [`LATENCY_END`], or neither; the module then weighs every delay it
/// inserts by the requests in flight ([`ExperimentEnd::in_flight_delay`]).
pub const LATENCY_BEGIN: u32 = 1;
/// `ProgressPoint.latency`: where a request of the plan's latency pair ends.
pub const LATENCY_END: u32 = 2;

wire! {
    /// One progress point of a [`CausalPlan`]: its index in the plan is its index in
    /// [`ExperimentEnd::points`].
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct ProgressPoint(24 + PROGRESS_NAME_BYTES) {
        /// `PROGRESS_*`.
        pub kind: u32,
        /// `LATENCY_*`: the point's part in the plan's latency pair, or 0.
        pub latency: u32,
        /// The function, tracepoint or user point name, NUL-padded.
        pub name: [u8; PROGRESS_NAME_BYTES],
        /// [`PROGRESS_SAMPLED`]: the first byte of the function's code; 0 for other kinds.
        pub start: u64,
        /// [`PROGRESS_SAMPLED`]: the byte after the function's code; 0 for other kinds.
        pub end: u64,
    }
    default;
}

impl ProgressPoint {
    /// A point of `kind` named `name` (cut to fit, keeping a NUL).
    #[must_use]
    pub fn new(kind: u32, name: &[u8]) -> Self {
        Self {
            kind,
            latency: 0,
            name: nul_padded(name),
            start: 0,
            end: 0,
        }
    }

    /// The point with `role` (`LATENCY_*`) in the plan's latency pair.
    #[must_use]
    pub fn with_latency(mut self, role: u32) -> Self {
        self.latency = role;
        self
    }

    /// A [`PROGRESS_SAMPLED`] point: the function `name`, whose code is `range`.
    #[must_use]
    pub fn sampled(name: &[u8], range: core::ops::Range<u64>) -> Self {
        Self {
            kind: PROGRESS_SAMPLED,
            latency: 0,
            name: nul_padded(name),
            start: range.start,
            end: range.end,
        }
    }

    /// The name without its NUL padding.
    #[must_use]
    pub fn name_bytes(&self) -> &[u8] {
        until_nul(&self.name)
    }

    /// A known kind, a non-empty name of printable ASCII without spaces, NUL-padded with at
    /// least one NUL; a non-empty range above 0 for a sampled point, none for the others; a
    /// latency role only on a counted point.
    fn is_valid(&self) -> bool {
        let name = self.name_bytes();
        let range_ok = if self.kind == PROGRESS_SAMPLED {
            0 < self.start && self.start < self.end
        } else {
            self.start == 0 && self.end == 0
        };
        let latency_ok = match self.latency {
            0 => true,
            LATENCY_BEGIN | LATENCY_END => self.kind != PROGRESS_SAMPLED,
            _ => false,
        };
        (PROGRESS_KPROBE..=PROGRESS_SAMPLED).contains(&self.kind)
            && range_ok
            && latency_ok
            && !name.is_empty()
            && name.len() < PROGRESS_NAME_BYTES
            && name.iter().all(u8::is_ascii_graphic)
            && self.name[name.len()..].iter().all(|&b| b == 0)
    }
}

wire! {
    /// The progress points of a causal session (`IOC_CAUSAL_PLAN`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct CausalPlan(16 + MAX_PROGRESS_POINTS * ProgressPoint::SIZE) {
        /// [`CausalPlan::SIZE`].
        pub struct_size: u32,
        /// Points in use, 1 to [`MAX_PROGRESS_POINTS`].
        pub point_count: u32,
        /// `CAUSAL_*` flags.
        pub flags: u32,
        /// The arrival point, as 1 + its index in `points` (0: none): where requests arrive,
        /// a counted point (not [`PROGRESS_SAMPLED`]). Its visits insert the experiment's
        /// [`ExperimentControl::arrival_delay_ns`] (load amplification), and a task that
        /// arrives first serves the delays it owes, so that arrivals keep their pace in
        /// effective time.
        pub arrival: u32,
        /// The points; unused ones all zero.
        pub points: [ProgressPoint; MAX_PROGRESS_POINTS],
    }
    encode;
    /// [`AbiError::OutOfRange`] for a wrong `struct_size`, unknown flags, a point count out of
    /// range, used points that are not valid or not distinct per kind, an arrival beyond
    /// the points or on a sampled point, or latency roles other than one begin and one end;
    /// [`AbiError::NonZeroReserved`] also for an unused point that is not all zero.
    decode, check;
}

impl CausalPlan {
    /// The points in use.
    #[must_use]
    pub fn used_points(&self) -> &[ProgressPoint] {
        &self.points[..(self.point_count as usize).min(MAX_PROGRESS_POINTS)]
    }

    /// The arrival point's index in `points`, if the plan has one in use.
    #[must_use]
    pub fn arrival_index(&self) -> Option<usize> {
        let index = (self.arrival as usize).checked_sub(1)?;
        (index < self.used_points().len()).then_some(index)
    }

    /// The indices in `points` of the latency pair's begin and end, if the plan has one.
    #[must_use]
    pub fn latency_pair(&self) -> Option<(usize, usize)> {
        let used = self.used_points();
        let find = |role| used.iter().position(|p| p.latency == role);
        Some((find(LATENCY_BEGIN)?, find(LATENCY_END)?))
    }

    fn arrival_point(&self) -> Option<&ProgressPoint> {
        self.arrival_index().map(|i| &self.points[i])
    }

    fn check(&self) -> Result<(), AbiError> {
        let count = self.point_count as usize;
        let ok = self.struct_size as usize == Self::SIZE
            && (1..=MAX_PROGRESS_POINTS).contains(&count)
            && self.flags & !(CAUSAL_RECORD_SAMPLES | CAUSAL_PER_CPU_DELAYS) == 0
            && self.points[..count].iter().all(ProgressPoint::is_valid)
            && !matches!(self.arrival_point(), Some(p) if p.kind == PROGRESS_SAMPLED)
            && self.arrival as usize <= count;
        if !ok {
            return Err(AbiError::OutOfRange);
        }
        let used = &self.points[..count];
        let roles = |role| used.iter().filter(|p| p.latency == role).count();
        let (begins, ends) = (roles(LATENCY_BEGIN), roles(LATENCY_END));
        if begins > 1 || begins != ends {
            return Err(AbiError::OutOfRange);
        }
        for (i, a) in used.iter().enumerate() {
            if used[i + 1..]
                .iter()
                .any(|b| b.kind == a.kind && b.name == a.name)
            {
                return Err(AbiError::OutOfRange);
            }
        }
        if self.points[count..]
            .iter()
            .any(|p| *p != ProgressPoint::default())
        {
            return Err(AbiError::NonZeroReserved);
        }
        Ok(())
    }
}

wire! {
    /// One entry of the causal type table (`IOC_CAUSAL_TYPE`): what the sampler's O(1) type
    /// test counts as an access to this type.
    ///
    /// - `ips`: the instructions that accessed the type in a first profiling phase. The
    ///   software sampler cannot see data addresses, so a sample is of this type when its ip
    ///   is in this set (the module keeps it in a hash table).
    /// - `cache_name`: with a hardware sampler's data address, a sample is also of this type
    ///   when the address lies in a slab page of this cache. Empty: ips only.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct CausalType(8 + CACHE_NAME_BYTES + 16) {
        /// [`CausalType::SIZE`].
        pub struct_size: u32,
        /// Index in the table, below [`MAX_CAUSAL_TYPES`]; setting an index again replaces it.
        pub index: u32,
        /// The slab cache's name, NUL-padded (may be empty).
        pub cache_name: [u8; CACHE_NAME_BYTES],
        /// User pointer to `ip_count` little-endian u64 instruction addresses.
        pub ips_ptr: u64,
        /// Number of addresses at `ips_ptr`, 0 to [`MAX_CAUSAL_TYPE_IPS`] (not 0 with an empty
        /// `cache_name`).
        pub ip_count: u32,
        _: u32,
    }
    encode;
    /// [`AbiError::OutOfRange`] for a wrong `struct_size`, an index beyond [`MAX_CAUSAL_TYPES`], a
    /// name not NUL-padded, too many ips, neither ips nor a name, or one of `ips_ptr` and
    /// `ip_count` zero and not the other.
    decode, check;
    default;
}

impl CausalType {
    /// The cache name without its NUL padding.
    #[must_use]
    pub fn name_bytes(&self) -> &[u8] {
        until_nul(&self.cache_name)
    }

    /// The entry with `name` as its cache name (cut to fit, keeping a NUL).
    #[must_use]
    pub fn with_name(mut self, name: &[u8]) -> Self {
        self.cache_name = nul_padded(name);
        self
    }

    fn check(&self) -> Result<(), AbiError> {
        let name = self.name_bytes();
        let ok = self.struct_size as usize == Self::SIZE
            && (self.index as usize) < MAX_CAUSAL_TYPES
            && name.len() < CACHE_NAME_BYTES
            && self.cache_name[name.len()..].iter().all(|&b| b == 0)
            && self.ip_count <= MAX_CAUSAL_TYPE_IPS
            && (self.ip_count != 0 || !name.is_empty())
            && (self.ip_count == 0) == (self.ips_ptr == 0);
        if ok {
            Ok(())
        } else {
            Err(AbiError::OutOfRange)
        }
    }
}

wire! {
    /// The code a causal session's units are chosen from (`IOC_CAUSAL_SCOPE`), as Coz's
    /// scope: a kernel sample whose ip lies outside every range counts, for the experiments'
    /// type test, as a sample of the first return address of its call chain (within
    /// [`MAX_CALLER_FRAMES`] frames) that lies inside one. So a helper that the scope leaves
    /// out (`memcpy`) is sped up with the function in scope that called it. Without a scope,
    /// every sample is its own ip.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct CausalScope(16) {
        /// [`CausalScope::SIZE`].
        pub struct_size: u32,
        /// Number of ranges at `ranges_ptr`, 1 to [`MAX_SCOPE_RANGES`].
        pub range_count: u32,
        /// User pointer to `range_count` pairs of little-endian u64 `[start, end)`, sorted by
        /// start, each non-empty, none overlapping the next.
        pub ranges_ptr: u64,
    }
    encode;
    /// [`AbiError::OutOfRange`] for a wrong `struct_size`, no range or too many, or a null
    /// `ranges_ptr`.
    decode, check;
    default;
}

impl CausalScope {
    fn check(&self) -> Result<(), AbiError> {
        let ok = self.struct_size as usize == Self::SIZE
            && (1..=MAX_SCOPE_RANGES).contains(&self.range_count)
            && self.ranges_ptr != 0;
        if ok {
            Ok(())
        } else {
            Err(AbiError::OutOfRange)
        }
    }
}

/// Whether `ranges` (`[start, end)` pairs) are as a [`CausalScope`] must list them: each
/// non-empty, sorted, and none overlapping the next.
#[must_use]
pub fn scope_ranges_valid(ranges: &[(u64, u64)]) -> bool {
    ranges.iter().all(|&(start, end)| start < end) && ranges.windows(2).all(|w| w[0].1 <= w[1].0)
}

/// Whether `ip` lies in one of `ranges` (valid as [`scope_ranges_valid`] says): a binary
/// search, for the sampler's handler.
#[must_use]
pub fn scope_contains(ranges: &[(u64, u64)], ip: u64) -> bool {
    // The last range that starts at or before ip.
    let after = ranges.partition_point(|&(start, _)| start <= ip);
    after > 0 && ip < ranges[after - 1].1
}

wire! {
    /// Where the page allocator's code lies (`IOC_PAGE_SITES`), for the site of a page
    /// allocation: the first return address of its call chain (within
    /// [`MAX_PAGE_CHAIN_FRAMES`] frames) past the allocator's frames that lies in no
    /// allocator range. When that address lies in an `elsewhere` range (the slab allocator,
    /// large kmallocs: code whose own events describe those pages), the allocation is not
    /// recorded. Both lists as a [`CausalScope`]'s ranges are: pairs of little-endian u64
    /// `[start, end)`, sorted, none overlapping the next.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct PageSites(32) {
        /// [`PageSites::SIZE`].
        pub struct_size: u32,
        /// Number of ranges at `allocator_ptr`, 1 to [`MAX_SCOPE_RANGES`].
        pub allocator_count: u32,
        /// User pointer to the page allocator's ranges.
        pub allocator_ptr: u64,
        /// User pointer to the `elsewhere` ranges (0 with none).
        pub elsewhere_ptr: u64,
        /// Number of ranges at `elsewhere_ptr`, 0 to [`MAX_SCOPE_RANGES`].
        pub elsewhere_count: u32,
        _: u32,
    }
    encode;
    /// [`AbiError::OutOfRange`] for a wrong `struct_size`, no allocator range or too many
    /// ranges, or a null pointer to ranges it counts.
    decode, check;
    default;
}

/// Frames of a page allocation's call chain the module looks through for its site.
pub const MAX_PAGE_CHAIN_FRAMES: usize = 24;

impl PageSites {
    fn check(&self) -> Result<(), AbiError> {
        let ok = self.struct_size as usize == Self::SIZE
            && (1..=MAX_SCOPE_RANGES).contains(&self.allocator_count)
            && self.allocator_ptr != 0
            && self.elsewhere_count <= MAX_SCOPE_RANGES
            && (self.elsewhere_count == 0 || self.elsewhere_ptr != 0);
        if ok {
            Ok(())
        } else {
            Err(AbiError::OutOfRange)
        }
    }
}

/// Where a page allocation's call chain (innermost first, the caller of the tracepoint's
/// probe among its first frames) says its pages came from: `Some(site)`, the first return
/// address past the first allocator frame that lies in no allocator range (0 when there is
/// no such frame), or `None` when that address is `elsewhere`'s. Both ranges as
/// [`scope_ranges_valid`] says.
#[must_use]
pub fn page_site(chain: &[u64], allocator: &[(u64, u64)], elsewhere: &[(u64, u64)]) -> Option<u64> {
    // A return address follows its call: the byte before it is the caller's.
    let code = |ret: u64| ret.wrapping_sub(1);
    let Some(first) = chain
        .iter()
        .position(|&ret| scope_contains(allocator, code(ret)))
    else {
        return Some(0);
    };
    let site = chain[first..]
        .iter()
        .copied()
        .find(|&ret| !scope_contains(allocator, code(ret)));
    match site {
        Some(ret) if scope_contains(elsewhere, code(ret)) => None,
        Some(ret) => Some(ret),
        None => Some(0),
    }
}

wire! {
    /// The experiment to start (`IOC_EXPERIMENT_START`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct ExperimentControl(16) {
        /// The collector's number for the experiment, echoed in its records.
        pub experiment: u32,
        /// Index of a type set with `IOC_CAUSAL_TYPE`.
        pub type_index: u32,
        /// Virtual speedup of the type's accesses, 0 to [`MAX_SPEEDUP_PERCENT`].
        pub speedup_percent: u32,
        /// Delay each visit of the plan's arrival point inserts for every other task (ns):
        /// arrivals come this much sooner in effective time. 0 without an arrival point.
        pub arrival_delay_ns: u32,
    }
    encode;
    /// [`AbiError::OutOfRange`] for a type index beyond [`MAX_CAUSAL_TYPES`] or a speedup over
    /// [`MAX_SPEEDUP_PERCENT`] (whether the type is set is the module's check).
    decode, check;
}

impl ExperimentControl {
    fn check(&self) -> Result<(), AbiError> {
        if (self.type_index as usize) < MAX_CAUSAL_TYPES
            && self.speedup_percent <= MAX_SPEEDUP_PERCENT
        {
            Ok(())
        } else {
            Err(AbiError::OutOfRange)
        }
    }
}

wire! {
    /// An experiment began: written when `IOC_EXPERIMENT_START` succeeds.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct ExperimentStart(ExperimentControl::SIZE + 8) {
        /// What the collector asked for.
        pub control: ExperimentControl,
        /// The global delay count (ns) when the experiment began.
        pub global_delay_ns: u64,
    }
    encode;
    /// [`AbiError::OutOfRange`] for a control that [`ExperimentControl::decode`] refuses.
    decode, check;
}

impl ExperimentStart {
    fn check(&self) -> Result<(), AbiError> {
        self.control.check()
    }
}

wire! {
    /// Visits of one progress point during an experiment.
    ///
    /// Latency by Little's law needs the mean number of requests in flight between a begin and
    /// an end point: over an experiment of length `T`, `integral = in_flight_at_start * T +
    /// (visits * T - time_sum_ns) of the begin point - (the same) of the end point`, where
    /// `in_flight_at_start` comes from the `total` counts of the experiment before.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct PointVisits(24) {
        /// Visits during the experiment.
        pub visits: u64,
        /// Sum over those visits of the time since the experiment began (ns).
        pub time_sum_ns: u64,
        /// Visits since the session started, this experiment's included.
        pub total: u64,
    }
}

/// `ExperimentEnd.flags`: the experiment was ended by `IOC_STOP` or the collector's close,
/// not by `IOC_EXPERIMENT_END`: its length is not the one the collector chose.
pub const EXPERIMENT_CUT_SHORT: u32 = 1;
/// `ExperimentEnd.flags`: per-task accounting found its task table full, so some task's delays
/// were accounted to the CPU it ran on for part of the experiment.
pub const EXPERIMENT_TASK_TABLE_FULL: u32 = 2;

wire! {
    /// An experiment ended: its measurements.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct ExperimentEnd(
        ExperimentControl::SIZE + 8 + 48 + MAX_PROGRESS_POINTS * PointVisits::SIZE + 24
    ) {
        /// The experiment, as started.
        pub control: ExperimentControl,
        /// `EXPERIMENT_*` flags.
        pub flags: u32,
        /// Number of progress points in the plan (entries of `points` in use).
        pub point_count: u32,
        /// Wall time from start to end (ns).
        pub wall_ns: u64,
        /// Growth of the global delay count: the delay every CPU was asked to serve (ns). The
        /// effective duration is `wall_ns - delay_ns`.
        pub delay_ns: u64,
        /// Sum of the pauses actually served (ns).
        pub paused_ns: u64,
        /// Delay forgiven (ns). Per task: to tasks woken by a task that had served it (Coz's
        /// rule for a thread woken by another). Per CPU ([`CAUSAL_PER_CPU_DELAYS`]): to CPUs
        /// found idle when they fell behind.
        pub credited_ns: u64,
        /// Samples the type test put on the experiment's type.
        pub type_samples: u64,
        /// All samples during the experiment.
        pub samples: u64,
        /// Visits of each progress point, in plan order.
        pub points: [PointVisits; MAX_PROGRESS_POINTS],
        /// With a latency pair in the plan: the sum over the delays inserted of each delay
        /// (ns) times the requests in flight when it was inserted (begin visits less end
        /// visits since the session started). The time the pauses stand for, removed from the
        /// requests' time in flight. 0 without a pair.
        pub in_flight_delay: u64,
        /// Pauses that stopped at the module's longest pause (5 ms) with more still owed.
        pub capped_pauses: u64,
        /// The most a task (per CPU: a CPU) still owed right after one of those pauses (ns):
        /// how far it fell behind the delays, 0 when no pause was capped.
        pub max_owed_after_pause_ns: u64,
    }
    encode;
    /// [`AbiError::OutOfRange`] for a control that [`ExperimentControl::decode`] refuses, unknown
    /// flags, a point count out of range, more type samples than samples, a debt left after
    /// capped pauses without any, more visits than the total, or unused points that are not
    /// zero.
    decode, check;
}

impl ExperimentEnd {
    fn check(&self) -> Result<(), AbiError> {
        self.control.check()?;
        let count = self.point_count as usize;
        let ok = self.flags & !(EXPERIMENT_CUT_SHORT | EXPERIMENT_TASK_TABLE_FULL) == 0
            && (1..=MAX_PROGRESS_POINTS).contains(&count)
            && self.type_samples <= self.samples
            && (self.capped_pauses != 0 || self.max_owed_after_pause_ns == 0)
            && self.points[..count].iter().all(|p| p.visits <= p.total)
            && self.points[count..]
                .iter()
                .all(|p| *p == PointVisits::default());
        if ok {
            Ok(())
        } else {
            Err(AbiError::OutOfRange)
        }
    }
}

/// Device state: open, not configured.
pub const STATE_IDLE: u32 = 0;
/// Device state: configured, not started.
pub const STATE_CONFIGURED: u32 = 1;
/// Device state: collecting.
pub const STATE_RUNNING: u32 = 2;
/// Device state: stopped; rings may still hold records to read.
pub const STATE_STOPPED: u32 = 3;

wire! {
    /// Counters of the collection (`IOC_STATUS`). The caller passes an array of [`CpuStatus`]
    /// (`cpus_ptr`, `cpus_len` entries, may be empty); the module fills up to `nr_cpu_ids` of
    /// them.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct Status(72) {
        /// In: user address of a `CpuStatus` array (0 with `cpus_len` 0 for none).
        pub cpus_ptr: u64,
        /// In: entries in that array.
        pub cpus_len: u32,
        /// Out: `nr_cpu_ids`; entries written are `min(cpus_len, nr_cpus)`.
        pub nr_cpus: u32,
        /// Out: `STATE_*`.
        pub state: u32,
        _: u32,
        /// Out: records written to all rings.
        pub records_written: u64,
        /// Out: records dropped on full rings.
        pub records_lost: u64,
        /// Out: bytes handed to `read()`.
        pub bytes_read: u64,
        /// Out: histories started.
        pub histories_started: u64,
        /// Out: debug-register traps ignored: on a CPU whose registers still pointed at a
        /// history that had ended (they are re-pointed asynchronously), or that was not ours.
        pub stray_hits: u64,
        /// Out: (CPU, debug register) pairs pointing at an object now; 0 when no history runs,
        /// and always 0 once collection has stopped.
        pub armed_slots: u32,
        /// Out: debug registers reserved on each CPU for histories (0 when none are).
        pub reserved_slots: u32,
    }
    encode;
    decode;
}

wire! {
    /// One CPU's ring counters.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct CpuStatus(24) {
        /// Records written to this CPU's ring.
        pub records_written: u64,
        /// Records dropped because the ring was full.
        pub records_lost: u64,
        /// Bytes waiting in the ring now.
        pub bytes_pending: u64,
    }
    encode;
    decode;
}
