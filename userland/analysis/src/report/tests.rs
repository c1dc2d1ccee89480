use super::*;
use dprof_model::{
    AddressSetStats, Bucket, Coverage, DataProfile, FieldCount, FieldsNamed, Metric, OrderingStats,
    ProfileInfo, TypeProfile,
};

struct Dwarf;

impl FieldSource for Dwarf {
    fn has_struct(&self, name: &str) -> bool {
        matches!(name, "sk_buff" | "dentry")
    }
    fn field_at(&self, struct_name: &str, offset: u64) -> Option<String> {
        match (struct_name, offset) {
            ("sk_buff", 0..=7) => Some("next".to_owned()),
            ("sk_buff", 0x70..=0x73) => Some("len".to_owned()),
            ("dentry", 0x80) => Some("d_lockref.lock_count".to_owned()),
            ("mm_struct", 0x328) => Some("rss_stat[0].counters".to_owned()),
            _ => None,
        }
    }
    fn fields_holding(&self, struct_name: &str, offset: u64) -> Vec<String> {
        match (struct_name, offset) {
            // A union: the count and the lock overlap.
            ("dentry", 0x80) => vec![
                "d_lockref".to_owned(),
                "d_lockref.lock_count".to_owned(),
                "d_lockref.lock.val.counter".to_owned(),
            ],
            // Flattened members name no array element.
            ("mm_struct", 0x328) => vec!["rss_stat".to_owned()],
            _ => self.field_at(struct_name, offset).into_iter().collect(),
        }
    }
    fn variable_type(&self, name: &str) -> Option<VariableType> {
        match name {
            "init_skb" => Some(VariableType::Composite("sk_buff".to_owned())),
            "jiffies_64" => Some(VariableType::Scalar { size: 8 }),
            "pivots" => Some(VariableType::ScalarArray {
                elem_size: 1,
                count: 16,
            }),
            _ => None,
        }
    }
}

fn slab_type(name: &str, site: Option<&str>, offsets: &[u64]) -> TypeProfile {
    TypeProfile {
        rank: 1,
        name: name.to_owned(),
        kind: TypeKind::Slab,
        cache: Some(name.split('@').next().unwrap_or(name).to_owned()),
        site: site.map(str::to_owned),
        struct_name: None,
        object_size: None,
        samples: 0,
        share: 0.0,
        reads: 0,
        writes: 0,
        read_writes: 0,
        objects: 0,
        bounced_objects: 0,
        bounce: false,
        bounced_histories: None,
        allocs: None,
        frees: None,
        peak_live_objects: None,
        peak_live_bytes: None,
        hardware: None,
        functions: Vec::new(),
        fields: offsets
            .iter()
            .map(|&offset| FieldCount {
                offset,
                size: 4,
                field: None,
                samples: 1,
                reads: 1,
                writes: 0,
                read_writes: 0,
                misses: None,
            })
            .collect(),
        cpus: Vec::new(),
    }
}

fn report(types: Vec<TypeProfile>) -> Report {
    Report {
        profile: ProfileInfo {
            kernel_release: String::new(),
            cpu_model: String::new(),
            online_cpus: 1,
            slab_merging: false,
            merged_caches: Vec::new(),
            records: 0,
            first_time_ns: None,
            last_time_ns: None,
            lost_records: 0,
            kallsyms_functions: 0,
        },
        coverage: Coverage::from_counts(&[0; Bucket::ALL.len()]),
        data_profile: DataProfile {
            metric: Metric::Samples,
            resolved_samples: 0,
            hardware: None,
            types,
            unsampled_types: 0,
        },
        unknown_functions: Vec::new(),
        address_set: AddressSetStats::default(),
        ordering: OrderingStats::default(),
        warnings: Vec::new(),
        histories: None,
        misses: None,
        working_set: None,
        causal: None,
    }
}

#[test]
fn struct_names_come_from_the_user_map_the_table_or_the_cache_name() {
    let mut names = StructNames::builtin();
    assert_eq!(
        names.struct_for("skbuff_head_cache", None).as_deref(),
        Some("sk_buff")
    );
    assert_eq!(names.struct_for("TCP", None).as_deref(), Some("tcp_sock"));
    assert_eq!(names.struct_for("names_cache", Some(&Dwarf)), None);
    assert_eq!(names.struct_for("dentry", None).as_deref(), Some("dentry"));
    assert_eq!(names.struct_for("my_cache", Some(&Dwarf)), None);
    names
        .add_user_map("# comment\n\nmy_cache = sk_buff\nTCP=\n")
        .expect("valid map");
    assert_eq!(
        names.struct_for("my_cache", None).as_deref(),
        Some("sk_buff")
    );
    assert_eq!(names.struct_for("TCP", None), None, "the user map wins");
    let err = names
        .add_user_map("ok=fine\nnot a mapping\n")
        .expect_err("line 2 is bad");
    assert_eq!(
        err,
        TypeMapError::Syntax {
            line: 2,
            text: "not a mapping".to_owned()
        }
    );
    assert!(names.add_user_map("a=b c").is_err());
}

#[test]
fn annotation_names_structs_and_fields() {
    let mut r = report(vec![
        slab_type("skbuff_head_cache", None, &[0x70, 4, 0x200]),
        slab_type("kmalloc-1k@__alloc_skb", Some("__alloc_skb"), &[0]),
    ]);
    annotate_fields(&mut r, &StructNames::builtin(), None);
    assert_eq!(
        r.data_profile.types[0].struct_name.as_deref(),
        Some("sk_buff")
    );
    assert_eq!(
        r.data_profile.types[0].fields[0].field, None,
        "no debug info"
    );
    annotate_fields(&mut r, &StructNames::builtin(), Some(&Dwarf));
    let fields: Vec<Option<&str>> = r.data_profile.types[0]
        .fields
        .iter()
        .map(|f| f.field.as_deref())
        .collect();
    assert_eq!(fields, [Some("len"), Some("next"), None]);
    assert_eq!(r.data_profile.types[1].struct_name, None);
}

/// A merged pool carries its first creator's name but holds the objects of every cache merged
/// into it: its per-site types get no struct from that name, even one the table knows.
#[test]
fn merged_pools_split_by_site_get_no_struct_name() {
    let mut r = report(vec![
        slab_type("dentry@d_alloc", Some("d_alloc"), &[0]),
        slab_type(
            "dentry@ext4_fc_track_template",
            Some("ext4_fc_track_template"),
            &[0],
        ),
        slab_type("dentry", None, &[0]),
    ]);
    annotate_fields(&mut r, &StructNames::builtin(), Some(&Dwarf));
    let structs: Vec<Option<&str>> = r
        .data_profile
        .types
        .iter()
        .map(|t| t.struct_name.as_deref())
        .collect();
    assert_eq!(structs, [None, None, Some("dentry")]);
}

#[test]
fn similar_types_suggests_close_names() {
    let r = report(vec![
        slab_type("skbuff_head_cache", None, &[]),
        slab_type("skbuff_fclone_cache", None, &[]),
        slab_type("task_struct", None, &[]),
        slab_type("kmalloc-1k@__alloc_skb", Some("__alloc_skb"), &[]),
    ]);
    assert_eq!(
        r.similar_types("skbuff", 5),
        ["skbuff_head_cache", "skbuff_fclone_cache"]
    );
    assert_eq!(r.similar_types("task_strcut", 5), ["task_struct"]);
    assert_eq!(r.similar_types("kmalloc-1k", 5), ["kmalloc-1k@__alloc_skb"]);
    assert!(r.similar_types("zzz", 5).is_empty());
}

#[test]
fn coverage_summary_lists_buckets_with_samples() {
    let mut counts = [0; Bucket::ALL.len()];
    counts[Bucket::Slab.index()] = 6;
    counts[Bucket::Stack.index()] = 2;
    counts[Bucket::UserMode.index()] = 2;
    let c = Coverage::from_counts(&counts);
    assert_eq!(
        c.summary,
        "10 samples: 8 resolved (80.0%): slab 60.0%, stack 20.0%; unresolved: user mode 20.0%"
    );
    assert_eq!(c.count(Bucket::Slab), 6);
    let empty = Coverage::from_counts(&[0; Bucket::ALL.len()]);
    assert_eq!(empty.summary, "0 samples: 0 resolved (0.0%)");
    for (i, b) in Bucket::ALL.iter().enumerate() {
        assert_eq!(b.index(), i);
    }
}

/// `dprof tui` reads back what `dprof report --json` wrote: the JSON holds the whole model,
/// hardware statistics included.
#[test]
fn json_reads_back_the_same_report() {
    use crate::pipeline::{self, Options};
    use dprof_fixtures::{data_profile as example, hardware as hw_example};
    use dprof_format::Profile;
    for bytes in [
        example::profile(),
        hw_example::profile(hw_example::Sampler::Ibs),
        hw_example::profile(hw_example::Sampler::Pebs),
    ] {
        let profile = Profile::from_vec(bytes).expect("valid profile");
        let mut report = pipeline::analyze(&profile, &Options::default()).expect("valid");
        annotate_fields(&mut report, &StructNames::builtin(), Some(&Dwarf));
        let json = serde_json::to_string_pretty(&report).expect("serializes");
        let back: Report = serde_json::from_str(&json).expect("deserializes");
        assert_eq!(back, report);
    }
}

#[test]
fn the_two_resolvers_agree_on_an_embedded_member_and_generic_types_take_the_instructions_struct() {
    use dprof_model::instruction_types::{GenericTyped, InstructionSite, InstructionTypes};
    let site = |address_type: &str, offset: u64, struct_name: &str, field: &str| InstructionSite {
        ip: 0x10,
        function: "f".to_owned(),
        address_type: Some(address_type.to_owned()),
        offset: Some(offset),
        struct_name: struct_name.to_owned(),
        variable: "v".to_owned(),
        displacement: 0,
        field: Some(field.to_owned()),
        samples: 2,
        agrees: None,
        address_struct: None,
        address_field: None,
    };
    let mut r = report(vec![
        slab_type("skbuff_head_cache", None, &[0]),
        slab_type("kmalloc-256@__alloc_skb", Some("__alloc_skb"), &[0x70]),
        slab_type("dentry", None, &[0x80]),
        slab_type("mm_struct", None, &[0x328]),
    ]);
    r.coverage.by_instruction = Some(InstructionTypes {
        sites: vec![
            // sk_buff's `next` at 0: a `struct list *` holding its `next` agrees...
            site("skbuff_head_cache", 0, "list", "next"),
            // ...its `len` does not.
            site("skbuff_head_cache", 0, "other", "len"),
            // A generic type: not compared.
            site("kmalloc-256@__alloc_skb", 0x70, "sk_buff", "len"),
            // A union member other than the first that holds the byte agrees.
            site("dentry", 0x80, "qspinlock", "val.counter"),
            // A struct in an array element: the element's member agrees.
            site("mm_struct", 0x328, "percpu_counter", "counters"),
        ],
        generic_types: vec![GenericTyped {
            type_name: "kmalloc-256@__alloc_skb".to_owned(),
            struct_name: "sk_buff".to_owned(),
            samples: 2,
            typed_samples: 2,
        }],
        ..InstructionTypes::default()
    });
    annotate_fields(&mut r, &StructNames::builtin(), Some(&Dwarf));
    let found = r.coverage.by_instruction.as_ref().expect("kept");
    assert_eq!((found.compared_samples, found.agreed_samples), (8, 6));
    let verdicts: Vec<Option<bool>> = found.sites.iter().map(|s| s.agrees).collect();
    assert_eq!(
        verdicts,
        [Some(true), Some(false), None, Some(true), Some(true)]
    );
    assert_eq!(
        found.sites[3].address_field.as_deref(),
        Some("d_lockref.lock_count"),
        "the evidence names the address's member as the data profile does"
    );
    assert_eq!(found.sites[1].address_field.as_deref(), Some("next"));
    let generic = &r.data_profile.types[1];
    assert_eq!(generic.struct_name.as_deref(), Some("sk_buff"));
    assert_eq!(generic.fields[0].field.as_deref(), Some("len"));
}

#[test]
fn global_and_per_cpu_variables_name_their_fields_or_themselves() {
    let variable = |name: &str, kind: TypeKind, offsets: &[u64]| TypeProfile {
        kind,
        cache: None,
        ..slab_type(name, None, offsets)
    };
    let mut r = report(vec![
        variable("global:init_skb", TypeKind::Global, &[0x70, 0x200]),
        variable("global:jiffies_64", TypeKind::Global, &[0, 8]),
        variable("percpu:pivots", TypeKind::Percpu, &[3, 16]),
        variable("global:unknown_var", TypeKind::Global, &[0]),
    ]);
    annotate_fields(&mut r, &StructNames::builtin(), Some(&Dwarf));
    let named: Vec<(Option<&str>, Vec<Option<&str>>)> = r
        .data_profile
        .types
        .iter()
        .map(|t| {
            (
                t.struct_name.as_deref(),
                t.fields.iter().map(|f| f.field.as_deref()).collect(),
            )
        })
        .collect();
    assert_eq!(
        named,
        [
            (Some("sk_buff"), vec![Some("len"), None]),
            (None, vec![Some("jiffies_64"), None]),
            (None, vec![Some("pivots[3]"), None]),
            (None, vec![None]),
        ],
        "a struct's fields; a scalar's own name within its size; an array's elements"
    );
    assert_eq!(
        r.coverage.fields_named,
        Some(FieldsNamed {
            typed_samples: 7,
            named_samples: 3
        })
    );
    assert!(
        r.coverage
            .summary
            .ends_with("; fields named for 42.9% of the samples on data types"),
        "{}",
        r.coverage.summary
    );
}
