use super::*;

fn slab() -> SlabPages {
    SlabPages {
        first_object: 0x1000 + 64,
        stride: 192,
        objects: 21,
        cache: "dentry".into(),
    }
}

#[test]
fn a_slab_holds_objects_on_its_slots_only() {
    let s = slab();
    assert!(slab_holds(&s, 0x1040, 192));
    assert!(slab_holds(&s, 0x1040 + 20 * 192, 192), "the last slot");
    assert!(slab_holds(&s, 0x1040 + 192, 0), "any slot size");
    assert!(
        !slab_holds(&s, 0x1040 + 21 * 192, 192),
        "past the last slot"
    );
    assert!(!slab_holds(&s, 0x1040 + 96, 192), "between slots");
    assert!(!slab_holds(&s, 0x1000, 192), "in the left redzone");
}

#[test]
fn a_slab_of_other_slots_does_not_hold_the_object() {
    // The page was freed and reused by a cache of 256-byte slots.
    assert!(!slab_holds(&slab(), 0x1040 + 192, 256));
}
