//! A profile's summary: counts per record kind and per cache, lost records, time span, and
//! access samples by function. The CLI renders it as text or JSON (`dprof dump --summary`).

use std::collections::BTreeMap;

use dprof_abi::{CacheInfo, Record, ALLOC_PAGES, CACHE_NAME_BYTES, FREE_PAGES, SAMPLE_USER};
use serde::{Serialize, Serializer};

use crate::decode::{DecodeStats, Decoder};
use crate::symbols::Kallsyms;
use dprof_format::{Profile, ProfileError};

/// Functions listed in [`SampleSummary::top_functions`].
pub const TOP_FUNCTIONS: usize = 10;

/// Counts over a whole profile.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Records in the file.
    pub records: u64,
    /// Bytes of records.
    pub record_bytes: u64,
    /// Records sections.
    pub chunks: u64,
    /// Records per kind.
    pub kinds: KindCounts,
    /// Bytes the records of each kind take in the file (coded, in a version 2 profile;
    /// block and section headers and the code table not counted).
    pub kind_bytes: KindCounts,
    /// The profile's format version.
    pub format_version: u32,
    /// Distinct sampled instructions in the code table (version 2).
    pub code_entries: usize,
    /// Earliest record time (ns), if any record.
    pub first_time_ns: Option<u64>,
    /// Latest record time (ns), if any record.
    pub last_time_ns: Option<u64>,
    /// Records the module dropped, from the Lost records (sum of their counts).
    pub lost: u64,
    /// The same per CPU, only CPUs that lost any, by CPU number.
    pub lost_per_cpu: Vec<CpuLost>,
    /// Per cache name, by allocations (most first; ties by name).
    pub caches: Vec<CacheSummary>,
    /// Access samples.
    pub samples: SampleSummary,
}

/// Access samples: where they landed and how many yield a data address.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SampleSummary {
    /// Samples in kernel mode.
    pub kernel: u64,
    /// Samples in user mode.
    pub user: u64,
    /// Kernel samples whose ip is in no symbol of the profile's kallsyms snapshot.
    pub unknown_function: u64,
    /// The kernel functions with the most samples (at most [`TOP_FUNCTIONS`]; most first,
    /// ties by name).
    pub top_functions: Vec<FunctionSamples>,
    /// What decoding the sampled instructions gave (software samples).
    pub decode: DecodeStats,
}

/// Samples in one kernel function.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FunctionSamples {
    /// Function name.
    pub function: String,
    /// Module, for functions of loadable modules.
    pub module: Option<String>,
    /// Samples with an ip in it.
    pub samples: u64,
}

/// Records per kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KindCounts {
    /// Alloc records.
    pub alloc: u64,
    /// Free records.
    pub free: u64,
    /// `CacheInfo` records.
    pub cache_info: u64,
    /// Lost records (not the records they count).
    pub lost: u64,
    /// `AccessSample` records.
    pub sample: u64,
    /// History records of every kind (start, arm, hit, end).
    pub history: u64,
    /// `HistoryHit` records.
    pub history_hit: u64,
    /// Causal experiment records (start and end).
    pub experiment: u64,
}

impl KindCounts {
    /// Adds `n` to the counter of `record`'s kind.
    fn add(&mut self, record: &Record, n: u64) {
        let counter = match record {
            Record::Alloc(_) => &mut self.alloc,
            Record::Free(_) => &mut self.free,
            Record::CacheInfo(_) => &mut self.cache_info,
            Record::Lost(_) => &mut self.lost,
            Record::AccessSample(_) => &mut self.sample,
            Record::HistoryHit(_) => {
                self.history_hit += n;
                &mut self.history
            }
            Record::HistoryStart(_) | Record::HistoryArm(_) | Record::HistoryEnd(_) => {
                &mut self.history
            }
            Record::ExperimentStart(_) | Record::ExperimentEnd(_) => &mut self.experiment,
        };
        *counter += n;
    }
}

/// Lost records of one CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CpuLost {
    /// CPU number.
    pub cpu: u32,
    /// Records dropped.
    pub count: u64,
}

/// The key of page allocator records (`ALLOC_PAGES`, `FREE_PAGES`) among the caches: no
/// cache identifier is all ones.
const PAGES: u64 = u64::MAX;

/// Where a record of `cache` counts: its cache, or [`PAGES`] when `pages` is set.
const fn cache_key(cache: u64, pages: u32) -> u64 {
    if pages == 0 {
        cache
    } else {
        PAGES
    }
}

/// Allocations and frees of the caches of one name (usually one cache; more when a cache
/// was destroyed and created again during collection).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CacheSummary {
    /// Name from the `CacheInfo`, `(no cache)` for cache 0 (large kmallocs, straight from
    /// the page allocator), `(page allocator)` for pages recorded as such (`ALLOC_PAGES`),
    /// `(unknown)` for caches the profile has no `CacheInfo` for.
    pub name: String,
    /// Cache identifiers with this name, ascending (hex strings in JSON: kernel addresses do
    /// not fit a JSON double).
    #[serde(serialize_with = "hex_list")]
    pub caches: Vec<u64>,
    /// Object size from the first cache's `CacheInfo`.
    pub object_size: Option<u32>,
    /// Alloc records.
    pub allocs: u64,
    /// Free records.
    pub frees: u64,
}

/// Serializes u64s as "0x..." strings.
///
/// # Errors
/// When the serializer fails.
pub fn hex_list<S: Serializer>(v: &[u64], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|x| format!("{x:#x}")))
}

/// A printable cache name: invalid UTF-8, control characters and spaces escaped, and "..."
/// appended when the module had to cut the name.
#[must_use]
pub fn cache_name(info: &CacheInfo) -> String {
    let mut name = String::new();
    for c in String::from_utf8_lossy(info.name_bytes()).chars() {
        if c.is_control() || c.is_whitespace() {
            name.extend(c.escape_default());
        } else {
            name.push(c);
        }
    }
    if usize::from(info.name_len) >= CACHE_NAME_BYTES {
        name.push_str("...");
    }
    name
}

/// Display name of cache `id` given the profile's cache infos.
#[must_use]
pub fn cache_label(id: u64, infos: &BTreeMap<u64, CacheInfo>) -> String {
    if id == PAGES {
        "(page allocator)".to_owned()
    } else if id == 0 {
        "(no cache)".to_owned()
    } else {
        infos
            .get(&id)
            .map_or_else(|| "(unknown)".to_owned(), cache_name)
    }
}

impl Summary {
    /// Summarizes `profile` in one pass over its records.
    ///
    /// # Errors
    /// The first problem found while reading the records (see [`Profile::records`]).
    pub fn of(profile: &Profile) -> Result<Self, ProfileError> {
        // The first CacheInfo of each cache, collected on the way: names are only needed at
        // the end.
        let mut infos: BTreeMap<u64, CacheInfo> = BTreeMap::new();
        let mut kinds = KindCounts::default();
        let mut kind_bytes = KindCounts::default();
        let mut earliest: Option<u64> = None;
        let mut latest: Option<u64> = None;
        let mut lost_by_cpu: BTreeMap<u32, u64> = BTreeMap::new();
        let mut per_cache: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        let syms = Kallsyms::parse(profile.kallsyms());
        let mut decoder = Decoder::new();
        let mut samples = SampleSummary::default();
        // By symbol index: no string work per sample.
        let mut per_function: BTreeMap<usize, u64> = BTreeMap::new();
        let mut records = profile.records();
        while let Some(item) = records.next() {
            let (header, record) = item?;
            earliest = Some(earliest.map_or(header.time_ns, |t| t.min(header.time_ns)));
            latest = Some(latest.map_or(header.time_ns, |t| t.max(header.time_ns)));
            kinds.add(&record, 1);
            kind_bytes.add(&record, records.last_record_file_bytes() as u64);
            match record {
                Record::Alloc(a) => {
                    per_cache
                        .entry(cache_key(a.cache, a.flags & ALLOC_PAGES))
                        .or_default()
                        .0 += 1;
                }
                Record::Free(f) => {
                    per_cache
                        .entry(cache_key(f.cache, f.flags & FREE_PAGES))
                        .or_default()
                        .1 += 1;
                }
                Record::CacheInfo(info) => {
                    infos.entry(info.cache).or_insert(info);
                }
                Record::Lost(l) => {
                    let n = lost_by_cpu.entry(header.cpu).or_default();
                    *n = n.saturating_add(l.count);
                }
                Record::HistoryStart(_)
                | Record::HistoryArm(_)
                | Record::HistoryHit(_)
                | Record::HistoryEnd(_)
                | Record::ExperimentStart(_)
                | Record::ExperimentEnd(_) => {}
                Record::AccessSample(a) => {
                    decoder.access(&a);
                    if a.flags & SAMPLE_USER != 0 {
                        samples.user += 1;
                    } else {
                        samples.kernel += 1;
                        match syms.lookup_index(a.ip) {
                            Some(i) => *per_function.entry(i).or_default() += 1,
                            None => samples.unknown_function += 1,
                        }
                    }
                }
            }
        }
        let mut functions: Vec<FunctionSamples> = per_function
            .into_iter()
            .filter_map(|(i, n)| {
                let sym = syms.symbol(i)?;
                Some(FunctionSamples {
                    function: sym.name.clone(),
                    module: sym.module.clone(),
                    samples: n,
                })
            })
            .collect();
        functions.sort_by(|a, b| {
            b.samples
                .cmp(&a.samples)
                .then_with(|| a.function.cmp(&b.function))
        });
        functions.truncate(TOP_FUNCTIONS);
        samples.top_functions = functions;
        samples.decode = *decoder.stats();
        let caches = caches_by_name(per_cache, &infos);
        Ok(Self {
            records: profile.record_count(),
            record_bytes: profile.record_bytes(),
            chunks: profile.chunk_count(),
            kinds,
            kind_bytes,
            format_version: profile.version(),
            code_entries: profile.code_entries(),
            first_time_ns: earliest,
            last_time_ns: latest,
            lost: lost_by_cpu.values().fold(0, |a, &b| a.saturating_add(b)),
            lost_per_cpu: lost_by_cpu
                .into_iter()
                .filter(|&(_, count)| count > 0)
                .map(|(cpu, count)| CpuLost { cpu, count })
                .collect(),
            caches,
            samples,
        })
    }
}

/// Allocations and frees per cache name (most allocated first), from the counts per cache.
fn caches_by_name(
    per_cache: BTreeMap<u64, (u64, u64)>,
    infos: &BTreeMap<u64, CacheInfo>,
) -> Vec<CacheSummary> {
    let mut by_name: BTreeMap<String, CacheSummary> = BTreeMap::new();
    // Ascending cache ids, so each name's list is sorted and its first id comes first.
    for (cache, (allocs, frees)) in per_cache {
        let name = cache_label(cache, infos);
        let entry = by_name.entry(name.clone()).or_insert_with(|| CacheSummary {
            name,
            caches: Vec::new(),
            object_size: infos.get(&cache).map(|i| i.object_size),
            allocs: 0,
            frees: 0,
        });
        if cache != PAGES {
            entry.caches.push(cache);
        }
        entry.allocs += allocs;
        entry.frees += frees;
    }
    let mut caches: Vec<CacheSummary> = by_name.into_values().collect();
    // A stable sort over names in order: ties stay alphabetical.
    caches.sort_by(|a, b| b.allocs.cmp(&a.allocs).then(b.frees.cmp(&a.frees)));
    caches
}

#[cfg(test)]
mod tests {
    use super::*;
    use dprof_fixtures::profile::{encode_record, example_header, example_profile};
    use dprof_format::{ProfileEncoder, StopInfo, StopReason};

    #[test]
    fn example_profile_summary() {
        let profile = Profile::from_vec(example_profile()).expect("example is valid");
        let s = Summary::of(&profile).expect("valid records");
        assert_eq!(s.records, 14);
        assert_eq!(
            s.kinds,
            KindCounts {
                alloc: 5,
                free: 2,
                cache_info: 3,
                lost: 1,
                sample: 3,
                history: 0,
                history_hit: 0,
                experiment: 0,
            }
        );
        assert_eq!((s.samples.kernel, s.samples.user), (2, 1));
        assert_eq!(s.format_version, dprof_format::FORMAT_VERSION);
        assert_eq!(s.code_entries, 3, "three distinct sampled instructions");
        // Every kind present takes bytes, none absent does, and the coded sizes are what
        // the bytes of the Block sections hold, less their headers.
        assert!(s.kind_bytes.alloc > 0 && s.kind_bytes.sample > 0 && s.kind_bytes.lost > 0);
        assert_eq!(s.kind_bytes.history + s.kind_bytes.experiment, 0);
        let coded = s.kind_bytes.alloc
            + s.kind_bytes.free
            + s.kind_bytes.cache_info
            + s.kind_bytes.lost
            + s.kind_bytes.sample;
        assert_eq!(
            coded,
            s.record_bytes - s.chunks * dprof_format::BLOCK_HEADER_SIZE as u64
        );
        let top: Vec<(&str, u64)> = s
            .samples
            .top_functions
            .iter()
            .map(|f| (f.function.as_str(), f.samples))
            .collect();
        assert_eq!(top, [("__alloc_skb", 1), ("kfree_skbmem", 1)]);
        assert_eq!(s.samples.decode.with_address(), 2);
        assert_eq!(s.samples.decode.gs_relative, 1);
        assert_eq!(s.samples.decode.user_mode, 1);
        assert_eq!(s.lost, 7);
        assert_eq!(s.lost_per_cpu, [CpuLost { cpu: 1, count: 7 }]);
        assert_eq!(
            (s.first_time_ns, s.last_time_ns),
            (Some(1_000), Some(6_300))
        );
        let names: Vec<(&str, u64, u64)> = s
            .caches
            .iter()
            .map(|c| (c.name.as_str(), c.allocs, c.frees))
            .collect();
        assert_eq!(
            names,
            [
                ("skbuff_head_cache", 2, 1),
                ("kmalloc-1k", 1, 1),
                ("(no cache)", 1, 0),
                ("a_cache_with_a_name_longer_than_the_abi_keeps_i...", 1, 0),
            ]
        );
    }

    /// The summary of a profile of `records`, all on CPU 0 at time 1.
    fn summary_of(records: &[dprof_abi::Record]) -> Summary {
        let bytes: Vec<u8> = records
            .iter()
            .flat_map(|r| encode_record(0, 1, r))
            .collect();
        let mut enc =
            ProfileEncoder::new(Vec::new(), &example_header(), b"", b"").expect("in memory");
        enc.records(&bytes).expect("valid");
        let profile = enc
            .finish(&StopInfo {
                reason: StopReason::DurationElapsed,
                ended_unix_s: 0,
                elapsed_ns: 0,
                device: None,
            })
            .expect("in memory");
        Summary::of(&Profile::from_vec(profile).expect("valid")).expect("valid records")
    }

    #[test]
    fn caches_of_one_name_are_counted_together() {
        let info = |cache| {
            dprof_abi::Record::CacheInfo(
                CacheInfo {
                    cache,
                    object_size: 64,
                    size: 64,
                    align: 8,
                    slab_flags: 0,
                    name_len: 0,
                    origin: 1,
                    name: [0; CACHE_NAME_BYTES],
                }
                .with_name(b"my\tcache"),
            )
        };
        let alloc = |cache| {
            dprof_abi::Record::Alloc(dprof_abi::Alloc {
                cache,
                ..dprof_abi::Alloc::default()
            })
        };
        let s = summary_of(&[
            info(0x20),
            alloc(0x20),
            info(0x10),
            alloc(0x10),
            alloc(0x30),
        ]);
        assert_eq!(s.caches.len(), 2);
        assert_eq!(s.caches[0].name, "my\\tcache");
        assert_eq!(s.caches[0].caches, [0x10, 0x20]);
        assert_eq!(s.caches[0].allocs, 2);
        assert_eq!(s.caches[1].name, "(unknown)");
        let json = serde_json::to_value(&s.caches[0]).expect("json");
        assert_eq!(json["caches"], serde_json::json!(["0x10", "0x20"]));
    }

    #[test]
    fn page_allocator_records_are_counted_apart_from_large_kmallocs() {
        let s = summary_of(&[
            dprof_abi::Record::Alloc(dprof_abi::Alloc {
                flags: ALLOC_PAGES,
                ..dprof_abi::Alloc::default()
            }),
            dprof_abi::Record::Alloc(dprof_abi::Alloc {
                flags: ALLOC_PAGES,
                ..dprof_abi::Alloc::default()
            }),
            dprof_abi::Record::Free(dprof_abi::Free {
                flags: FREE_PAGES,
                ..dprof_abi::Free::default()
            }),
            dprof_abi::Record::Alloc(dprof_abi::Alloc::default()),
        ]);
        let rows: Vec<(&str, u64, u64, usize)> = s
            .caches
            .iter()
            .map(|c| (c.name.as_str(), c.allocs, c.frees, c.caches.len()))
            .collect();
        assert_eq!(
            rows,
            [("(page allocator)", 2, 1, 0), ("(no cache)", 1, 0, 1)]
        );
    }
}
