//! Compile-time checks of structs shared with C. Included by both modules' crates
//! (`dprof.ko` and `dprof_selftest.ko`).

/// Fails the build unless `$ty` has size `$size` and each field its offset. The C header
/// that defines the struct states the same numbers with `static_assert`, so a layout change
/// on either side alone breaks the build.
macro_rules! assert_c_layout {
    ($ty:ty, size $size:literal, { $($field:ident: $offset:literal),+ $(,)? }) => {
        const _: () = {
            assert!(core::mem::size_of::<$ty>() == $size);
            $(assert!(core::mem::offset_of!($ty, $field) == $offset);)+
        };
    };
}
