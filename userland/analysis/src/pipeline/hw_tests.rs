//! The data profile of hardware samples (`hw_example`): misses, miss rates, latencies, data
//! sources and HITM, with numbers worked out by hand from the example's table.

use super::*;
use dprof_fixtures::hardware::{self as hw_example, Sampler};
use dprof_format::Profile;
use dprof_model::TypeProfile;

fn report(sampler: Sampler) -> Report {
    let profile = Profile::from_vec(hw_example::profile(sampler)).expect("valid profile");
    analyze(&profile, &Options::default()).expect("valid records")
}

fn ty<'r>(r: &'r Report, name: &str) -> &'r TypeProfile {
    r.find_type(name)
        .unwrap_or_else(|| panic!("no type {name}"))
}

fn hw(t: &TypeProfile) -> &TypeHardware {
    t.hardware.as_ref().expect("hardware statistics")
}

fn sources(list: &[SourceCount]) -> Vec<(MemSource, u64)> {
    list.iter().map(|s| (s.source, s.samples)).collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn ibs_types_are_ranked_by_misses() {
    let r = report(Sampler::Ibs);
    assert_eq!(r.data_profile.metric, Metric::Misses);
    let order: Vec<(&str, u64, Option<u64>)> = r
        .data_profile
        .types
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.samples,
                t.hardware.as_ref().map(|h| h.misses),
            )
        })
        .collect();
    // task_struct has the most samples but misses once.
    assert_eq!(
        order,
        [
            ("skbuff_head_cache", 7, Some(5)),
            ("kmalloc-1k@__alloc_skb", 2, Some(2)),
            ("task_struct", 9, Some(1)),
            ("global:jiffies", 1, Some(1)),
            ("stack", 1, Some(0)),
        ]
    );
    let c = &r.coverage;
    assert_eq!((c.total_samples, c.resolved_samples), (23, 20));
    assert_eq!(c.count(Bucket::Slab), 18);
    assert_eq!(c.count(Bucket::Stack), 1);
    assert_eq!(c.count(Bucket::UnknownAddress), 1);
    assert_eq!(c.count(Bucket::UserMode), 1);
    // The IBS op that was neither a load nor a store.
    assert_eq!(c.count(Bucket::NoMemoryOperand), 1);
    // push %rdi and the op without bytes resolved through the hardware address.
    assert_eq!(c.count(Bucket::MultipleMemoryOperands), 0);
    assert_eq!(c.count(Bucket::NoBytes), 0);
}

#[test]
fn ibs_per_type_misses_latency_sources_hitm() {
    let r = report(Sampler::Ibs);
    let skb = ty(&r, "skbuff_head_cache");
    let h = hw(skb);
    assert_eq!(
        (h.samples, h.misses, h.hitm, h.latency_samples),
        (7, 5, 2, 4)
    );
    assert!(close(h.miss_rate, 5.0 / 7.0), "{}", h.miss_rate);
    assert!(close(h.miss_share, 5.0 / 9.0), "{}", h.miss_share);
    // (240 + 120 + 300 + 20) / 4
    assert_eq!(h.mean_latency_cycles, Some(170.0));
    assert_eq!(
        sources(&h.sources),
        [
            (MemSource::L1, 2),
            (MemSource::L2, 1),
            (MemSource::L3, 1),
            (MemSource::NearCache, 1),
            (MemSource::Dram, 1),
            (MemSource::Unknown, 1),
        ]
    );
    // The `lock incl` stays a read-modify-write: the decoder decides read/write.
    assert_eq!((skb.reads, skb.writes, skb.read_writes), (5, 1, 1));
    let fields: Vec<(u64, u64, Option<u64>)> = skb
        .fields
        .iter()
        .map(|f| (f.offset, f.samples, f.misses))
        .collect();
    assert_eq!(
        fields,
        [(0x8, 3, Some(3)), (0x70, 3, Some(1)), (0x10, 1, Some(1))]
    );
    let fns: Vec<(&str, u64, Option<u64>)> = skb
        .functions
        .iter()
        .map(|f| (f.function.as_str(), f.samples, f.misses))
        .collect();
    assert_eq!(
        fns,
        [("tcp_recvmsg", 4, Some(4)), ("tcp_sendmsg", 3, Some(1))]
    );

    let km = hw(ty(&r, "kmalloc-1k@__alloc_skb"));
    assert_eq!((km.samples, km.misses, km.hitm), (2, 2, 0));
    assert_eq!(km.mean_latency_cycles, Some(235.0));
    assert_eq!(
        sources(&km.sources),
        [(MemSource::FillBuffer, 1), (MemSource::RemoteDram, 1)]
    );
    // The op without instruction bytes: 8 bytes, from IBS's op_mem_width.
    let f80 = ty(&r, "kmalloc-1k@__alloc_skb")
        .fields
        .iter()
        .find(|f| f.offset == 0x80)
        .expect("+0x80");
    assert_eq!((f80.size, f80.reads, f80.misses), (8, 1, Some(1)));

    let task = hw(ty(&r, "task_struct"));
    assert_eq!((task.samples, task.misses, task.latency_samples), (9, 1, 1));
    assert_eq!(task.mean_latency_cycles, Some(14.0));
    assert_eq!(
        sources(&task.sources),
        [(MemSource::L1, 8), (MemSource::L2, 1)]
    );

    let jiffies = hw(ty(&r, "global:jiffies"));
    assert_eq!((jiffies.misses, jiffies.hitm), (1, 1));
    assert_eq!(sources(&jiffies.sources), [(MemSource::RemoteCache, 1)]);

    let stack = ty(&r, "stack");
    assert_eq!((stack.writes, hw(stack).misses), (1, 0));
    assert_eq!(hw(stack).mean_latency_cycles, None);

    assert_eq!(r.unknown_functions.len(), 1);
    assert_eq!(r.unknown_functions[0].function, "do_sys_poll");
    assert_eq!(r.unknown_functions[0].misses, Some(1));
}

#[test]
fn ibs_profile_summary() {
    let r = report(Sampler::Ibs);
    let s = r.data_profile.hardware.as_ref().expect("summary");
    assert_eq!(s.samplers, ["ibs"]);
    assert_eq!(
        (s.samples, s.resolved_samples, s.misses, s.hitm),
        (21, 20, 9, 3)
    );
    assert!(close(s.miss_rate, 0.45));
    // (680 + 14 + 470 + 520) / 8
    assert_eq!((s.latency_samples, s.mean_latency_cycles), (8, Some(210.5)));
    assert_eq!((s.hardware_addresses, s.address_mismatches), (21, 1));
    assert_eq!(
        sources(&s.sources),
        [
            (MemSource::L1, 11),
            (MemSource::L2, 2),
            (MemSource::FillBuffer, 1),
            (MemSource::L3, 1),
            (MemSource::NearCache, 1),
            (MemSource::RemoteCache, 1),
            (MemSource::Dram, 1),
            (MemSource::RemoteDram, 1),
            (MemSource::Unknown, 1),
        ]
    );
    let sum: u64 = s.sources.iter().map(|c| c.samples).sum();
    assert_eq!(sum, s.resolved_samples);
}

#[test]
fn pebs_gives_the_same_ranking_with_its_own_latencies() {
    let r = report(Sampler::Pebs);
    assert_eq!(r.data_profile.metric, Metric::Misses);
    let order: Vec<(&str, u64, Option<u64>)> = r
        .data_profile
        .types
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.samples,
                t.hardware.as_ref().map(|h| h.misses),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            ("skbuff_head_cache", 6, Some(4)),
            ("kmalloc-1k@__alloc_skb", 2, Some(2)),
            ("task_struct", 8, Some(1)),
            ("global:jiffies", 1, Some(1)),
        ]
    );
    let skb = hw(ty(&r, "skbuff_head_cache"));
    assert_eq!(
        (skb.samples, skb.misses, skb.hitm, skb.latency_samples),
        (6, 4, 2, 6)
    );
    // PEBS gives every load a latency: (5 + 5 + 240 + 120 + 300 + 20) / 6.
    assert_eq!(skb.mean_latency_cycles, Some(115.0));
    assert_eq!(
        sources(&skb.sources),
        [
            (MemSource::L1, 2),
            (MemSource::L2, 1),
            (MemSource::L3, 1),
            (MemSource::NearCache, 1),
            (MemSource::Dram, 1),
        ]
    );
    // (7 * 5 + 14) / 8
    let task = hw(ty(&r, "task_struct"));
    assert_eq!(task.mean_latency_cycles, Some(6.125));
    let s = r.data_profile.hardware.as_ref().expect("summary");
    assert_eq!(s.samplers, ["pebs"]);
    assert_eq!(
        (
            s.samples,
            s.resolved_samples,
            s.misses,
            s.hitm,
            s.latency_samples
        ),
        (18, 17, 8, 3, 17)
    );
    assert_eq!(s.address_mismatches, 1);
    // PEBS says nothing of the width: the op without bytes has size 0 (unknown).
    let f80 = ty(&r, "kmalloc-1k@__alloc_skb")
        .fields
        .iter()
        .find(|f| f.offset == 0x80)
        .expect("+0x80");
    assert_eq!(f80.size, 0);
}

#[test]
fn without_hardware_data_types_rank_by_samples() {
    let bytes = dprof_fixtures::data_profile::profile_with(
        &dprof_fixtures::data_profile::header(),
        dprof_fixtures::data_profile::KALLSYMS,
        &[hw_example::software_records()],
    );
    let profile = Profile::from_vec(bytes).expect("valid profile");
    let r = analyze(&profile, &Options::default()).expect("valid records");
    assert_eq!(r.data_profile.metric, Metric::Samples);
    assert_eq!(r.data_profile.hardware, None);
    assert_eq!(r.data_profile.types[0].name, "task_struct");
    assert!(r.data_profile.types.iter().all(|t| t.hardware.is_none()
        && t.fields.iter().all(|f| f.misses.is_none())
        && t.functions.iter().all(|f| f.misses.is_none())));
    // Without the hardware address, the clobbered %rdi sends one load nowhere.
    assert_eq!(ty(&r, "task_struct").samples, 7);
    let json = serde_json::to_string(&r).expect("json");
    assert!(
        !json.contains("misses") && !json.contains("hardware"),
        "{json}"
    );
}
