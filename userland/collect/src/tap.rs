//! What the collector looks at in the records it writes: the trap ips of histories (whose
//! code it copies at the end), the owners of the direct-map pages samples touch, and during a
//! planning phase, the analysis that picks what the histories watch.

use dprof_abi::Config;
use dprof_analysis::pipeline::{Analyzer, Options};
use dprof_analysis::symbols::Kallsyms;
use dprof_format::ProfileHeader;

use crate::histories;
use crate::options::CollectOptions;
use crate::page_owner::PageOwnerWatch;

/// Watches the records on their way to the file.
pub(crate) struct Tap<'s> {
    pub(crate) traps: Option<histories::TrapIps>,
    pub(crate) planner: Option<Planner<'s>>,
    pub(crate) page_owners: Option<PageOwnerWatch>,
}

/// A planning phase in progress.
pub(crate) struct Planner<'s> {
    pub(crate) spec: histories::HistorySpec,
    /// Fed with every record until the phase ends.
    pub(crate) analyzer: Option<Analyzer<'s>>,
    /// The configuration to start the histories with.
    pub(crate) config: Config,
}

impl<'s> Tap<'s> {
    /// What `options` needs watched; `config` is what histories start with after planning.
    pub(crate) fn new(
        options: &CollectOptions,
        header: &ProfileHeader,
        symbols: &'s Kallsyms,
        analysis: &Options,
        config: Config,
    ) -> Self {
        Self {
            traps: options
                .histories
                .as_ref()
                .map(|_| histories::TrapIps::default()),
            planner: options
                .histories
                .as_ref()
                .filter(|spec| spec.needs_planning())
                .map(|spec| Planner {
                    spec: spec.clone(),
                    analyzer: Some(Analyzer::new(header, symbols, analysis)),
                    config,
                }),
            page_owners: None,
        }
    }

    /// Looks at whole records as the device returned them, each decoded once.
    pub(crate) fn see(&mut self, bytes: &[u8]) {
        let mut analyzer = self.planner.as_mut().and_then(|p| p.analyzer.as_mut());
        if self.traps.is_none() && analyzer.is_none() && self.page_owners.is_none() {
            return;
        }
        let mut pos = 0;
        while let Some(rest) = bytes.get(pos..).filter(|r| !r.is_empty()) {
            let Ok((header, record)) = dprof_abi::Record::decode(rest) else {
                return; // the writer reports bad records
            };
            if let Some(traps) = &mut self.traps {
                traps.note(&record);
            }
            if let Some(owners) = &mut self.page_owners {
                owners.see(&record);
            }
            if let Some(analyzer) = analyzer.as_mut() {
                analyzer.push(&header, &record);
            }
            pos += usize::from(header.size).max(dprof_abi::RECORD_ALIGN);
        }
    }
}
