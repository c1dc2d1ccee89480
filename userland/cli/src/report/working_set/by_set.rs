//! `dprof report --view working-set --by-set`: per cache level, the associativity sets by the
//! types whose lines they hold at the level's peak, conflicted first, each type with its
//! distinct objects, whether its own histogram flags the set, and the allocation sites the
//! objects came from; then the paths of those sites.

use std::io::{self, Write};

use dprof_model::histories::{HistoryReport, PathTrace};
use dprof_model::working_set::{LevelSets, SetOccupants, SetType, WorkingSetReport};
use dprof_model::Report;

use super::super::output::{csv_field, since_start, Table};

/// Sets per level in text when --top is not given: with a few types each, more would bury
/// the conflicted sets of the next level.
pub(super) const DEFAULT_SETS: usize = 10;

/// The sets of `level` that `only` (a type name) has lines in, or all.
fn shown_sets<'l>(level: &'l LevelSets, only: Option<&'l str>) -> Vec<&'l SetOccupants> {
    level
        .occupied
        .iter()
        .filter(|s| only.is_none_or(|name| s.types.iter().any(|t| t.name == name)))
        .collect()
}

/// `ss_send_ack 1, ss_send_fin 1`.
fn sites_text(t: &SetType) -> String {
    let sites: Vec<String> = t
        .sites
        .iter()
        .map(|s| format!("{} {}", s.function, s.objects))
        .collect();
    sites.join(", ")
}

/// Every level's sets, at most `top` per level, and the paths of the sites shown.
pub(super) fn text(
    report: &Report,
    ws: &WorkingSetReport,
    only: Option<&str>,
    top: usize,
    out: &mut impl Write,
) -> io::Result<()> {
    if ws.by_set.is_empty() {
        return writeln!(out, "Sets: none without cache geometry (--cache gives one)");
    }
    // (type, site) pairs shown, in order of appearance, for the paths section.
    let mut shown_sites: Vec<(&str, &str, &[usize])> = Vec::new();
    for level in &ws.by_set {
        let sets = shown_sets(level, only);
        writeln!(
            out,
            "{} sets at the level's peak ({}): {} lines in {} of {} sets, mean {:.3} per set, \
             {} ways; {} conflicted",
            level.level,
            since_start(ws, level.peak_time_ns),
            level.lines,
            level.occupied_sets,
            level.sets,
            level.mean_lines_per_set,
            level.ways,
            level.conflicted_sets
        )?;
        let mut table = Table::new(&[
            ("set", true),
            ("lines", true),
            ("", false),
            ("type", false),
            ("objects", true),
            ("its lines", true),
            ("", false),
            ("allocated in (objects)", false),
        ]);
        for set in sets.iter().take(top) {
            for (i, t) in set.types.iter().enumerate() {
                let first = i == 0;
                table.row(vec![
                    if first {
                        set.set.to_string()
                    } else {
                        String::new()
                    },
                    if first {
                        set.lines.to_string()
                    } else {
                        String::new()
                    },
                    if first && set.conflicted {
                        "conflicted".to_owned()
                    } else {
                        String::new()
                    },
                    t.name.clone(),
                    t.objects.to_string(),
                    t.lines.to_string(),
                    if t.flagged {
                        "flagged".to_owned()
                    } else {
                        String::new()
                    },
                    sites_text(t),
                ]);
                for s in &t.sites {
                    let pair = (t.name.as_str(), s.function.as_str());
                    if !shown_sites.iter().any(|&(n, f, _)| (n, f) == pair) {
                        shown_sites.push((pair.0, pair.1, &s.paths));
                    }
                }
            }
        }
        table.write(out)?;
        let unlisted = if only.is_none() {
            level.sets_left_out
        } else {
            0
        };
        more_line(sets.len().saturating_sub(top), unlisted, out)?;
        writeln!(out)?;
    }
    paths_text(report.histories.as_ref(), &shown_sites, out)
}

/// What the table left out: sets beyond `--top`, and sets the analysis did not list.
fn more_line(more: usize, unlisted: u64, out: &mut impl Write) -> io::Result<()> {
    match (more, unlisted) {
        (0, 0) => Ok(()),
        (more, 0) => writeln!(
            out,
            "... {more} more sets (--top N shows more; --json and --format csv have them all)"
        ),
        (0, unlisted) => writeln!(out, "... {unlisted} less busy sets are only counted"),
        (more, unlisted) => writeln!(
            out,
            "... {more} more sets (--top N shows more; --json and --format csv have them all), \
             then {unlisted} less busy sets that are only counted"
        ),
    }
}

/// The path traces of each (type, site) shown, or why there are none.
fn paths_text(
    histories: Option<&HistoryReport>,
    shown_sites: &[(&str, &str, &[usize])],
    out: &mut impl Write,
) -> io::Result<()> {
    if histories.is_none_or(|h| h.types.is_empty()) {
        return writeln!(
            out,
            "Paths: the profile has no object access histories, so the objects' paths are \
             their allocation sites above (collect --histories for the functions they pass \
             through)"
        );
    }
    writeln!(
        out,
        "Paths from the sites above (path traces of watched objects allocated there; numbered \
         as in --view data-flow):"
    )?;
    let mut without: Vec<String> = Vec::new();
    for &(name, site, paths) in shown_sites {
        let traces = histories
            .and_then(|h| h.find_type(name))
            .map_or(&[][..], |t| t.paths.as_slice());
        if paths.is_empty() {
            without.push(format!("{name} from {site}"));
            continue;
        }
        for &i in paths {
            if let Some(p) = traces.get(i) {
                writeln!(out, "  {name} from {site}: {}", path_line(i, p))?;
            }
        }
    }
    if !without.is_empty() {
        writeln!(out, "  no history: {}", without.join(", "))?;
    }
    Ok(())
}

/// `path 2 (1 history, 50.0%): ss_send_ack > vw_read_a > vw_free`.
fn path_line(index: usize, p: &PathTrace) -> String {
    format!(
        "path {} ({} histor{}, {:.1}%): {}",
        index + 1,
        p.histories,
        if p.histories == 1 { "y" } else { "ies" },
        p.share * 100.0,
        p.functions().join(" > ")
    )
}

/// One row per level, set, type and allocation site, every listed set; the site's paths as
/// `N:f > g > h` joined by `; `.
pub(super) fn csv(
    report: &Report,
    ws: &WorkingSetReport,
    only: Option<&str>,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(
        out,
        "level,set,set_lines,conflicted,type,objects,type_lines,type_flagged,site,site_objects,paths"
    )?;
    for level in &ws.by_set {
        for set in shown_sets(level, only) {
            for t in &set.types {
                let traces = report
                    .histories
                    .as_ref()
                    .and_then(|h| h.find_type(&t.name))
                    .map_or(&[][..], |h| h.paths.as_slice());
                for s in &t.sites {
                    let paths: Vec<String> = s
                        .paths
                        .iter()
                        .filter_map(|&i| {
                            traces
                                .get(i)
                                .map(|p| format!("{}:{}", i + 1, p.functions().join(" > ")))
                        })
                        .collect();
                    writeln!(
                        out,
                        "{},{},{},{},{},{},{},{},{},{},{}",
                        level.level,
                        set.set,
                        set.lines,
                        if set.conflicted { "yes" } else { "no" },
                        csv_field(&t.name),
                        t.objects,
                        t.lines,
                        if t.flagged { "yes" } else { "no" },
                        csv_field(&s.function),
                        s.objects,
                        csv_field(&paths.join("; "))
                    )?;
                }
            }
        }
    }
    Ok(())
}
