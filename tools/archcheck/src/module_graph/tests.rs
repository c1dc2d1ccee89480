use super::*;

/// Writes `(path, source)` files under a temp dir and checks the crate rooted at the first.
fn cycles_of(files: &[(&str, &str)]) -> Vec<Vec<String>> {
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, source) in files {
        let file = dir.path().join(path);
        fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        fs::write(file, source).expect("write");
    }
    let root = CrateRoot {
        name: "test".to_owned(),
        root_file: dir.path().join(files[0].0),
    };
    let report = check(&[root], dir.path());
    assert_eq!(report.problems, Vec::<String>::new());
    report
        .cycles
        .iter()
        .map(|cycle| {
            cycle
                .members
                .iter()
                .map(|(module, _)| module.clone())
                .collect()
        })
        .collect()
}

#[test]
fn two_sibling_modules_importing_each_other_are_a_cycle() {
    let cycles = cycles_of(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;\n"),
        (
            "b.rs",
            "pub struct B;\nfn make() -> crate::a::A { crate::a::A }\n",
        ),
    ]);
    assert_eq!(cycles, [["a.rs", "b.rs"]]);
}

#[test]
fn the_example_import_names_file_and_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    fs::write(dir.path().join("lib.rs"), "mod a;\nmod b;\n").expect("write");
    fs::write(dir.path().join("a.rs"), "\n\nuse crate::b::{x, y};\n").expect("write");
    fs::write(dir.path().join("b.rs"), "use super::a::*;\n").expect("write");
    let root = CrateRoot {
        name: "test".to_owned(),
        root_file: dir.path().join("lib.rs"),
    };
    let report = check(&[root], dir.path());
    assert_eq!(
        report.cycles[0].to_string(),
        "cycle of 2 modules in test:\n  a.rs\n      -> b.rs via `crate::b::x` at a.rs:3\n  \
         b.rs\n      -> a.rs via `super::a` at b.rs:1\n"
    );
}

#[test]
fn paths_in_macro_arguments_are_imports() {
    let cycles = cycles_of(&[
        (
            "lib.rs",
            "mod a;\nmod b;\nmacro_rules! m { () => { $crate::b::f() }; }\n",
        ),
        (
            "a.rs",
            "pub fn f() -> String { format!(\"{}\", crate::b::name()) }\n",
        ),
        (
            "b.rs",
            "pub fn name() -> String { assert!(super::a::f().is_empty()); String::new() }\n",
        ),
    ]);
    assert_eq!(cycles, [["a.rs", "b.rs"]]);
}

#[test]
fn parent_and_child_importing_each_other_are_a_cycle() {
    let cycles = cycles_of(&[
        ("lib.rs", "mod views;\n"),
        (
            "views.rs",
            "mod misses;\npub use misses::Misses;\nfn common_notes() {}\n",
        ),
        (
            "views/misses.rs",
            "pub struct Misses;\nfn notes() { super::common_notes() }\n",
        ),
    ]);
    assert_eq!(cycles, [["views.rs", "views/misses.rs"]]);
}

#[test]
fn helpers_in_a_sibling_module_are_no_cycle() {
    let cycles = cycles_of(&[
        ("lib.rs", "mod views;\n"),
        (
            "views.rs",
            "mod misses;\nmod notes;\npub use misses::Misses;\n",
        ),
        (
            "views/misses.rs",
            "pub struct Misses;\nfn f() { super::notes::common() }\n",
        ),
        ("views/notes.rs", "pub(super) fn common() {}\n"),
    ]);
    assert_eq!(cycles, Vec::<Vec<String>>::new());
}

#[test]
fn comments_and_doc_comments_are_no_imports() {
    let cycles = cycles_of(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        (
            "a.rs",
            "//! See [`crate::b::B`].\n/// use crate::b::B;\n// use crate::b::B;\n\
             /* crate::b::B */\n#[doc = \"crate::b::B\"]\npub struct A;\n",
        ),
        ("b.rs", "use crate::a::A;\npub struct B;\n"),
    ]);
    assert_eq!(cycles, Vec::<Vec<String>>::new());
}

#[test]
fn visibility_and_a_test_module_are_no_cycle() {
    let cycles = cycles_of(&[
        (
            "lib.rs",
            "mod a;\npub use a::f;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        ),
        ("a.rs", "pub(crate) fn f() {}\npub(super) fn g() {}\n"),
    ]);
    assert_eq!(cycles, Vec::<Vec<String>>::new());
}

#[test]
fn an_inline_module_is_a_node_of_its_own() {
    let cycles = cycles_of(&[(
        "lib.rs",
        "pub fn f() { inner::g() }\nmod inner {\n    pub fn g() { super::f() }\n}\n",
    )]);
    assert_eq!(cycles, [["lib.rs", "lib.rs::inner"]]);
}

#[test]
fn missing_and_unparsable_files_are_reported_and_the_rest_checked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let files = [
        ("lib.rs", "mod a;\nmod b;\nmod gone;\nmod broken;\n"),
        ("a.rs", "use crate::b::B;\n"),
        ("b.rs", "use crate::a::A;\n"),
        ("broken.rs", "fn f() {\n"),
    ];
    for (path, source) in files {
        fs::write(dir.path().join(path), source).expect("write");
    }
    let root = CrateRoot {
        name: "test".to_owned(),
        root_file: dir.path().join("lib.rs"),
    };
    let report = check(&[root], dir.path());
    assert_eq!(report.cycles.len(), 1);
    assert_eq!(report.problems.len(), 2, "{:?}", report.problems);
    assert!(
        report.problems[0].starts_with("broken.rs:"),
        "{:?}",
        report.problems
    );
    assert_eq!(report.problems[1], "lib.rs:3: no file for `mod gone;`");
}

#[test]
fn path_attributes_are_followed() {
    let cycles = cycles_of(&[
        (
            "kmod/main.rs",
            "#[path = \"../abi/src/wire.rs\"]\nmod abi;\npub struct Root(abi::Wire);\n",
        ),
        (
            "abi/src/wire.rs",
            "pub struct Wire;\nfn root() -> Option<crate::Root> { None }\n",
        ),
    ]);
    assert_eq!(cycles, [["abi/src/wire.rs", "kmod/main.rs"]]);
}
