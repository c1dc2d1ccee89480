//! Check 1: no import cycle among the modules of a crate.
//!
//! A module is a file or an inline `mod x { .. }`. An import is any `use` or path in code that
//! starts with `crate::`, `super::`, `self::` or the name of a child module, resolved to the
//! deepest module it names. `mod x;` itself is not an import, so a parent that uses its child
//! while the child uses the parent is a cycle: helpers shared by siblings belong in a sibling.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::path::{Component, Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};
use syn::{Attribute, Expr, Item, ItemUse, Lit, Macro, Meta, UseTree, Visibility};

/// A crate to check: a display name and its root file (lib.rs, main.rs, a kernel module's).
pub struct CrateRoot {
    pub name: String,
    pub root_file: PathBuf,
}

#[derive(Debug, Default)]
pub struct Report {
    pub cycles: Vec<Cycle>,
    /// Module files that are missing or do not parse. The rest is still checked, but the check
    /// fails: what these files import is unknown.
    pub problems: Vec<String>,
    pub modules_checked: usize,
}

/// The modules of one strongly connected component, with one import each into the others.
#[derive(Debug)]
pub struct Cycle {
    pub crate_name: String,
    /// `(module, example import)`, sorted by module.
    pub members: Vec<(String, String)>,
}

impl fmt::Display for Cycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "cycle of {} modules in {}:",
            self.members.len(),
            self.crate_name
        )?;
        for (module, example) in &self.members {
            writeln!(f, "  {module}")?;
            writeln!(f, "      {example}")?;
        }
        Ok(())
    }
}

/// Finds the import cycles of every crate; file paths are shown relative to `base`.
pub fn check(crates: &[CrateRoot], base: &Path) -> Report {
    let mut report = Report::default();
    for krate in crates {
        let tree = ModuleTree::load(&krate.root_file, base);
        report.problems.extend_from_slice(&tree.problems);
        report.modules_checked += tree.modules.len();
        report.cycles.extend(tree.cycles(&krate.name));
    }
    report
        .cycles
        .sort_by(|a, b| (&a.crate_name, &a.members).cmp(&(&b.crate_name, &b.members)));
    // A file in two crates (the ABI's wire.rs) would be reported twice.
    report.problems.sort();
    report.problems.dedup();
    report
}

type ModuleId = usize;

struct Module {
    /// The file, relative to the base, with `::name` appended for inline modules.
    label: String,
    /// The file the module's code is in, relative to the base.
    file: String,
    parent: Option<ModuleId>,
    children: BTreeMap<String, ModuleId>,
    /// Its own items; its child modules are modules of their own.
    items: Vec<Item>,
}

/// Where a module's `mod x;` declarations look for files.
struct ModuleDirs {
    /// Where `x.rs` and `x/mod.rs` are looked for.
    children: PathBuf,
    /// What `#[path = "..."]` is relative to.
    path_attribute_base: PathBuf,
}

struct Import {
    from: ModuleId,
    to: ModuleId,
    line: usize,
    path: String,
}

struct ModuleTree {
    /// The crate root is module 0.
    modules: Vec<Module>,
    /// What file paths are shown relative to.
    base: PathBuf,
    problems: Vec<String>,
}

impl ModuleTree {
    fn load(root_file: &Path, base: &Path) -> Self {
        let mut tree = ModuleTree {
            modules: Vec::new(),
            base: base.to_path_buf(),
            problems: Vec::new(),
        };
        let dir = root_file.parent().unwrap_or(Path::new("")).to_path_buf();
        let items = tree.read_items(root_file);
        let label = relative(root_file, base);
        let dirs = ModuleDirs {
            children: dir.clone(),
            path_attribute_base: dir,
        };
        tree.add(None, label.clone(), label, items, &dirs);
        tree
    }

    /// The items of `file`; none, and a problem noted, if it cannot be read or parsed.
    fn read_items(&mut self, file: &Path) -> Vec<Item> {
        let label = relative(file, &self.base);
        let source = match fs::read_to_string(file) {
            Ok(source) => source,
            Err(error) => {
                self.problems.push(format!("{label}: cannot read: {error}"));
                return Vec::new();
            }
        };
        match syn::parse_file(&source) {
            Ok(parsed) => parsed.items,
            Err(error) => {
                // Line 0: a lexer error (say, an unclosed brace), which has no position.
                let at = error.span().start();
                let location = if at.line == 0 {
                    label
                } else {
                    format!("{label}:{}:{}", at.line, at.column + 1)
                };
                self.problems
                    .push(format!("{location}: cannot parse: {error}"));
                Vec::new()
            }
        }
    }

    fn add(
        &mut self,
        parent: Option<ModuleId>,
        label: String,
        file: String,
        items: Vec<Item>,
        dirs: &ModuleDirs,
    ) -> ModuleId {
        let id = self.modules.len();
        let module = Module {
            label,
            file,
            parent,
            children: BTreeMap::new(),
            items: Vec::new(),
        };
        self.modules.push(module);
        let mut own_items = Vec::new();
        for item in items {
            let Item::Mod(declaration) = item else {
                own_items.push(item);
                continue;
            };
            let name = declaration.ident.to_string();
            let path_attribute = path_attribute(&declaration.attrs);
            let child = if let Some((_, inline_items)) = declaration.content {
                let dir = dirs
                    .children
                    .join(path_attribute.as_deref().unwrap_or(&name));
                let label = format!("{}::{name}", self.modules[id].label);
                let file = self.modules[id].file.clone();
                let dirs = ModuleDirs {
                    children: dir.clone(),
                    path_attribute_base: dir,
                };
                self.add(Some(id), label, file, inline_items, &dirs)
            } else {
                let candidates = match &path_attribute {
                    Some(path) => vec![dirs.path_attribute_base.join(path)],
                    None => vec![
                        dirs.children.join(format!("{name}.rs")),
                        dirs.children.join(&name).join("mod.rs"),
                    ],
                };
                let Some(child_file) = candidates
                    .into_iter()
                    .map(|file| normalize(&file))
                    .find(|file| file.is_file())
                else {
                    let line = declaration.ident.span().start().line;
                    let parent_file = &self.modules[id].file;
                    self.problems
                        .push(format!("{parent_file}:{line}: no file for `mod {name};`"));
                    continue;
                };
                // A file reached by `#[path]` or named mod.rs keeps its children beside it.
                let child_dir = if path_attribute.is_some() || child_file.ends_with("mod.rs") {
                    child_file.parent().unwrap_or(Path::new("")).to_path_buf()
                } else {
                    dirs.children.join(&name)
                };
                let dirs = ModuleDirs {
                    children: child_dir,
                    path_attribute_base: child_file.parent().unwrap_or(Path::new("")).to_path_buf(),
                };
                let label = relative(&child_file, &self.base);
                let items = self.read_items(&child_file);
                self.add(Some(id), label.clone(), label, items, &dirs)
            };
            self.modules[id].children.insert(name, child);
        }
        self.modules[id].items = own_items;
        id
    }

    /// Every import between two different modules.
    fn imports(&self) -> Vec<Import> {
        let mut imports = Vec::new();
        for (from, module) in self.modules.iter().enumerate() {
            let mut collector = PathCollector::default();
            for item in &module.items {
                collector.visit_item(item);
            }
            for found in collector.paths {
                if let Some(to) = self.resolve(from, &found) {
                    if to != from {
                        imports.push(Import {
                            from,
                            to,
                            line: found.line,
                            path: found.segments.join("::"),
                        });
                    }
                }
            }
        }
        imports
    }

    /// The deepest module that `path`, written in module `from`, names; `None` if none.
    fn resolve(&self, from: ModuleId, path: &FoundPath) -> Option<ModuleId> {
        let (first, rest) = path.segments.split_first()?;
        let mut current = match first.as_str() {
            "crate" => 0,
            "super" => self.modules[from].parent?,
            "self" => from,
            // A lone name in code is more likely a local than a module.
            name if self.modules[from].children.contains_key(name)
                && (path.in_use || !rest.is_empty()) =>
            {
                self.modules[from].children[name]
            }
            _ => return None,
        };
        for segment in rest {
            current = match segment.as_str() {
                "super" => self.modules[current].parent?,
                "self" => current,
                name => match self.modules[current].children.get(name) {
                    Some(&child) => child,
                    None => break,
                },
            };
        }
        Some(current)
    }

    fn cycles(&self, crate_name: &str) -> Vec<Cycle> {
        let imports = self.imports();
        let mut edges = vec![BTreeSet::new(); self.modules.len()];
        for import in &imports {
            edges[import.from].insert(import.to);
        }
        let mut cycles = Vec::new();
        for component in strongly_connected_components(&edges) {
            if component.len() < 2 {
                continue;
            }
            let mut members: Vec<(String, String)> = component
                .iter()
                .map(|&module| {
                    let example = imports
                        .iter()
                        .filter(|import| import.from == module && component.contains(&import.to))
                        .min_by_key(|import| import.line)
                        .map(|import| {
                            let at = format!("{}:{}", self.modules[module].file, import.line);
                            format!(
                                "-> {} via `{}` at {at}",
                                self.modules[import.to].label, import.path
                            )
                        })
                        .unwrap_or_default();
                    (self.modules[module].label.clone(), example)
                })
                .collect();
            members.sort();
            cycles.push(Cycle {
                crate_name: crate_name.to_owned(),
                members,
            });
        }
        cycles
    }
}

/// `a/b/../c` as `a/c`, so that a file reached by `#[path = "../x.rs"]` reads as it lies.
fn normalize(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir if normal.file_name().is_some() => {
                normal.pop();
            }
            Component::CurDir => {}
            _ => normal.push(component),
        }
    }
    normal
}

fn relative(file: &Path, base: &Path) -> String {
    file.strip_prefix(base)
        .unwrap_or(file)
        .display()
        .to_string()
}

/// The value of a `#[path = "..."]` attribute.
fn path_attribute(attrs: &[Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| match &attr.meta {
        Meta::NameValue(pair) if pair.path.is_ident("path") => match &pair.value {
            Expr::Lit(expr) => match &expr.lit {
                Lit::Str(path) => Some(path.value()),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    })
}

/// A path that may name a module: from a `use` tree or from code.
struct FoundPath {
    segments: Vec<String>,
    line: usize,
    in_use: bool,
}

/// Collects the paths of one module's items, without entering its child modules.
#[derive(Default)]
struct PathCollector {
    paths: Vec<FoundPath>,
}

impl PathCollector {
    /// Macro arguments are plain tokens to syn: take every `a::b..` run in them as a path.
    fn add_macro_paths(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let is_punct = |index: usize, char: char| is_punct_at(&tokens, index, char);
        let mut index = 0;
        while index < tokens.len() {
            match &tokens[index] {
                TokenTree::Group(group) => self.add_macro_paths(group.stream()),
                // After `$` it is `$crate` of a macro body; after `:` an extern `::path`.
                TokenTree::Ident(first)
                    if index == 0 || !(is_punct(index - 1, '$') || is_punct(index - 1, ':')) =>
                {
                    let mut segments = vec![first.to_string()];
                    while is_punct(index + 1, ':') && is_punct(index + 2, ':') {
                        let Some(TokenTree::Ident(next)) = tokens.get(index + 3) else {
                            break;
                        };
                        segments.push(next.to_string());
                        index += 3;
                    }
                    if segments.len() > 1 {
                        let line = first.span().start().line;
                        self.paths.push(FoundPath {
                            segments,
                            line,
                            in_use: false,
                        });
                    }
                }
                _ => {}
            }
            index += 1;
        }
    }

    fn add_use_tree(&mut self, tree: &UseTree, prefix: &mut Vec<String>) {
        let (segments, line) = match tree {
            UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.add_use_tree(&path.tree, prefix);
                prefix.pop();
                return;
            }
            UseTree::Group(group) => {
                for tree in &group.items {
                    self.add_use_tree(tree, prefix);
                }
                return;
            }
            UseTree::Name(syn::UseName { ident })
            | UseTree::Rename(syn::UseRename { ident, .. }) => (
                [prefix.as_slice(), &[ident.to_string()]].concat(),
                ident.span().start().line,
            ),
            UseTree::Glob(glob) => (prefix.clone(), glob.star_token.spans[0].start().line),
        };
        self.paths.push(FoundPath {
            segments,
            line,
            in_use: true,
        });
    }
}

fn is_punct_at(tokens: &[TokenTree], index: usize, char: char) -> bool {
    matches!(tokens.get(index), Some(TokenTree::Punct(punct)) if punct.as_char() == char)
}

impl<'ast> Visit<'ast> for PathCollector {
    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {}

    fn visit_item_use(&mut self, item: &'ast ItemUse) {
        // `use ::name` is an extern crate.
        if item.leading_colon.is_none() {
            self.add_use_tree(&item.tree, &mut Vec::new());
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            if let Some(first) = path.segments.first() {
                self.paths.push(FoundPath {
                    segments: path
                        .segments
                        .iter()
                        .map(|segment| segment.ident.to_string())
                        .collect(),
                    line: first.ident.span().start().line,
                    in_use: false,
                });
            }
        }
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast Macro) {
        self.visit_path(&mac.path);
        // A `macro_rules!` body is used where the macro expands, not where it is defined.
        if !mac.path.is_ident("macro_rules") {
            self.add_macro_paths(mac.tokens.clone());
        }
    }

    // `pub(crate)` and `pub(super)` say who may see an item, not what it uses.
    fn visit_visibility(&mut self, _: &'ast Visibility) {}

    fn visit_attribute(&mut self, attr: &'ast Attribute) {
        // Doc comments, and their [`crate::x`] links, are not imports.
        if !attr.path().is_ident("doc") {
            visit::visit_attribute(self, attr);
        }
    }
}

/// Tarjan's algorithm: the strongly connected components of a graph given as adjacency sets.
fn strongly_connected_components(edges: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
    struct Tarjan<'a> {
        edges: &'a [BTreeSet<usize>],
        index: Vec<Option<usize>>,
        low_link: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next_index: usize,
        components: Vec<Vec<usize>>,
    }

    impl Tarjan<'_> {
        fn visit(&mut self, node: usize) {
            self.index[node] = Some(self.next_index);
            self.low_link[node] = self.next_index;
            self.next_index += 1;
            self.stack.push(node);
            self.on_stack[node] = true;
            for &next in &self.edges[node] {
                match self.index[next] {
                    None => {
                        self.visit(next);
                        self.low_link[node] = self.low_link[node].min(self.low_link[next]);
                    }
                    Some(next_index) if self.on_stack[next] => {
                        self.low_link[node] = self.low_link[node].min(next_index);
                    }
                    Some(_) => {}
                }
            }
            if Some(self.low_link[node]) == self.index[node] {
                let mut component = Vec::new();
                while let Some(member) = self.stack.pop() {
                    self.on_stack[member] = false;
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                self.components.push(component);
            }
        }
    }

    let count = edges.len();
    let mut tarjan = Tarjan {
        edges,
        index: vec![None; count],
        low_link: vec![0; count],
        on_stack: vec![false; count],
        stack: Vec::new(),
        next_index: 0,
        components: Vec::new(),
    };
    for node in 0..count {
        if tarjan.index[node].is_none() {
            tarjan.visit(node);
        }
    }
    tarjan.components
}

#[cfg(test)]
mod tests;
