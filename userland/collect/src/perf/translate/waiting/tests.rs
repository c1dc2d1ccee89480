use super::*;

const PTR: u64 = 0xffff_8880_0100_0040;

fn alloc_at(ptr: u64, time_ns: u64) -> WaitingAlloc {
    let alloc = Alloc {
        ptr,
        bytes_alloc: 192,
        ..Alloc::default()
    };
    WaitingAlloc::new(time_ns, alloc, b"slab-192".to_vec())
}

/// A released item: a record by its bytes, an allocation by (time, named cache).
type Released = Result<Vec<u8>, (u64, Option<u64>)>;

/// What `cpu` lets go, in order.
fn released(w: &mut Waiting, cpu: u32) -> Vec<Released> {
    std::iter::from_fn(|| w.next_ready(cpu))
        .map(|h| match h {
            Held::Record(bytes) => Ok(bytes),
            Held::Alloc(a) => Err((a.time_ns, a.named_cache())),
        })
        .collect()
}

#[test]
fn a_waiting_allocation_holds_its_cpu_until_its_free_names_the_cache() {
    let mut w = Waiting::default();
    w.wait(1, alloc_at(PTR, 100));
    assert!(w.holds(1));
    assert!(!w.holds(0), "other CPUs go on");
    w.hold(1, b"after");
    assert!(
        released(&mut w, 1).is_empty(),
        "nothing passes the waiting allocation"
    );
    assert_eq!(w.freed(PTR, 150, Some(7)), Some(1));
    assert_eq!(
        released(&mut w, 1),
        vec![Err((100, Some(7))), Ok(b"after".to_vec())],
        "the allocation first, named by its free, then what came after it"
    );
    assert!(!w.holds(1));
}

#[test]
fn a_free_drained_before_its_allocation_names_it_at_once() {
    let mut w = Waiting::default();
    assert_eq!(w.freed(PTR, 150, Some(7)), None);
    w.drain_ended();
    w.wait(0, alloc_at(PTR, 100));
    assert_eq!(released(&mut w, 0), vec![Err((100, Some(7)))]);
    assert!(!w.holds(0));
}

#[test]
fn a_free_of_an_earlier_object_at_the_address_names_nothing() {
    let mut w = Waiting::default();
    // Freed at 50, allocated again at 100: that free was the previous object's.
    w.freed(PTR, 50, Some(3));
    w.wait(0, alloc_at(PTR, 100));
    assert_eq!(w.freed(PTR, 90, Some(3)), None, "older than the allocation");
    assert!(released(&mut w, 0).is_empty());
    assert_eq!(w.freed(PTR, 120, Some(4)), Some(0));
    assert_eq!(released(&mut w, 0), vec![Err((100, Some(4)))]);
}

#[test]
fn two_drains_without_a_free_leave_the_name_to_the_size() {
    let mut w = Waiting::default();
    w.wait(0, alloc_at(PTR, 100));
    w.hold(0, b"r");
    w.drain_ended();
    assert!(
        released(&mut w, 0).is_empty(),
        "one drain may not have seen the free"
    );
    w.drain_ended();
    assert_eq!(
        released(&mut w, 0),
        vec![Err((100, None)), Ok(b"r".to_vec())]
    );
    // Its free, later, finds nothing waiting.
    assert_eq!(w.freed(PTR, 500, Some(7)), None);
}

#[test]
fn a_kfree_names_no_cache_but_ends_the_wait() {
    let mut w = Waiting::default();
    w.wait(0, alloc_at(PTR, 100));
    assert_eq!(w.freed(PTR, 120, None), Some(0));
    assert_eq!(released(&mut w, 0), vec![Err((100, None))]);
}

#[test]
fn the_oldest_waiting_allocation_of_an_address_takes_the_first_free() {
    let mut w = Waiting::default();
    w.wait(0, alloc_at(PTR, 100));
    w.wait(1, alloc_at(PTR + 192, 105));
    w.wait(1, alloc_at(PTR, 130));
    assert_eq!(w.freed(PTR, 120, Some(7)), Some(0));
    assert_eq!(released(&mut w, 0), vec![Err((100, Some(7)))]);
    assert!(
        released(&mut w, 1).is_empty(),
        "CPU 1's first allocation still waits"
    );
    assert_eq!(w.freed(PTR + 192, 140, Some(8)), Some(1));
    assert_eq!(
        released(&mut w, 1),
        vec![Err((105, Some(8)))],
        "the second waits for a free after 130"
    );
    assert_eq!(w.freed(PTR, 160, Some(7)), Some(1));
    assert_eq!(released(&mut w, 1), vec![Err((130, Some(7)))]);
}

#[test]
fn at_the_end_nothing_waits() {
    let mut w = Waiting::default();
    w.wait(0, alloc_at(PTR, 100));
    w.hold(0, b"r");
    w.give_up();
    assert_eq!(
        released(&mut w, 0),
        vec![Err((100, None)), Ok(b"r".to_vec())]
    );
    assert!(w.cpus_holding().is_empty());
}

#[test]
fn frees_are_remembered_for_two_drains_only() {
    let mut w = Waiting::default();
    w.freed(PTR, 150, Some(7));
    w.drain_ended();
    w.drain_ended();
    w.wait(0, alloc_at(PTR, 100));
    assert!(
        released(&mut w, 0).is_empty(),
        "a free two drains old is forgotten"
    );
}
