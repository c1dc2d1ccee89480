//! `pahole -F dwarf -E -C A,B,...` output to member trees.
//!
//! With `-E` (`--expand_types`) pahole expands every nested struct, union and enum in place
//! and prints each member's offset from the start of the outermost struct
//! (`/* OFFSET SIZE */`, `/* OFFSET:BIT SIZE */` for bit-fields, where BIT counts from the
//! least significant bit of the storage unit at OFFSET and SIZE is that unit's size). Elements
//! of an array of structs are printed once, at element 0's offsets.
//!
//! pahole 1.24 also prints, after a member of an anonymous type, that type once more with no
//! offset after its closing brace (and relative offsets inside). Those blocks describe no
//! member and are dropped: only a block whose closing line carries an offset is a member.

/// One member as pahole places it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// `None` for an anonymous struct or union (and unnamed bit-fields).
    pub name: Option<String>,
    /// Bytes from the start of the outermost struct (of element 0, in arrays of structs).
    pub offset: u64,
    /// Bytes: the whole array for arrays, the storage unit for bit-fields.
    pub size: u64,
    /// A bit-field: its first bit from `offset` and its width.
    pub bits: Option<(u64, u64)>,
    /// An array: its element count (all dimensions multiplied).
    pub count: Option<u64>,
    /// A struct or union (or an array of them): its members.
    pub children: Option<Vec<Node>>,
}

/// One outermost struct.
#[derive(Debug)]
pub struct Struct {
    pub name: String,
    /// From pahole's `/* size: N, ... */` summary.
    pub size: Option<u64>,
    pub members: Vec<Node>,
}

/// An open block: what kind, and the members read so far.
struct Frame {
    is_enum: bool,
    members: Vec<Node>,
}

/// Every outermost struct in `text`, in the order printed.
///
/// # Panics
/// On a line this parser does not understand, naming it (pahole's format changed).
pub fn parse(text: &str) -> Vec<Struct> {
    let mut out = Vec::new();
    let mut current: Option<(String, Option<u64>)> = None;
    let mut stack: Vec<Frame> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let (code, comment) = split(line);
        if stack.len() == 1 {
            if let Some(size) = line
                .trim()
                .strip_prefix("/* size: ")
                .and_then(|s| s.split(',').next())
                .and_then(|s| s.trim().parse().ok())
            {
                if let Some((_, total)) = &mut current {
                    *total = Some(size);
                }
            }
        }
        if code.is_empty() {
            continue;
        }
        if let Some(head) = code.strip_suffix('{') {
            let head = head.trim();
            if stack.is_empty() {
                let name = head.strip_prefix("struct ").unwrap_or(head).trim();
                current = Some((name.to_owned(), None));
            }
            stack.push(Frame {
                is_enum: head.starts_with("enum"),
                members: Vec::new(),
            });
            continue;
        }
        if let Some(tail) = code.strip_prefix('}') {
            let frame = stack
                .pop()
                .unwrap_or_else(|| panic!("line {}: unmatched }}", number + 1));
            if stack.is_empty() {
                let (name, size) = current.take().expect("a struct was opened");
                out.push(Struct {
                    name,
                    size,
                    members: frame.members,
                });
                continue;
            }
            // No offset: a repeated anonymous type, not a member.
            let Some(place) = comment.and_then(place) else {
                continue;
            };
            let mut node = member(tail, place)
                .unwrap_or_else(|| panic!("line {}: cannot read {line:?}", number + 1));
            if !frame.is_enum {
                node.children = Some(frame.members);
            }
            stack
                .last_mut()
                .expect("inside a struct")
                .members
                .push(node);
            continue;
        }
        if code.ends_with(',') || stack.last().is_some_and(|f| f.is_enum) {
            // An enumerator.
            continue;
        }
        let Some(place) = comment.and_then(place) else {
            // Members without a place: `:0` bit-fields, which hold nothing.
            continue;
        };
        let node = member(code, place)
            .unwrap_or_else(|| panic!("line {}: cannot read {line:?}", number + 1));
        match stack.last_mut() {
            Some(frame) => frame.members.push(node),
            None => panic!("line {}: a member outside any struct", number + 1),
        }
    }
    out
}

/// A line's code without leading comments (`/* typedef u32 -> __u32 */ unsigned int x;`)
/// and its trailing comment, if any.
fn split(line: &str) -> (&str, Option<&str>) {
    let mut code = line.trim();
    while code.starts_with("/*") {
        match code.find("*/") {
            Some(end) => code = code[end + 2..].trim_start(),
            None => return ("", None),
        }
    }
    if let (Some(body), Some(start)) = (code.strip_suffix("*/"), code.rfind("/*")) {
        return (code[..start].trim_end(), Some(body[start + 2..].trim()));
    }
    (code, None)
}

/// `OFFSET SIZE` or `OFFSET:BIT SIZE`.
fn place(comment: &str) -> Option<(u64, Option<u64>, u64)> {
    let number = |s: &str| s.trim().parse::<u64>().ok();
    if let Some((offset, rest)) = comment.split_once(':') {
        let mut words = rest.split_whitespace();
        let (bit, size) = (number(words.next()?)?, number(words.next()?)?);
        return words
            .next()
            .is_none()
            .then_some((number(offset)?, Some(bit), size));
    }
    let mut words = comment.split_whitespace();
    let (offset, size) = (number(words.next()?)?, number(words.next()?)?);
    words.next().is_none().then_some((offset, None, size))
}

/// A member from its declaration (`unsigned int x:3;`, `char cb[48] __attribute__(...);`,
/// `void (*fn)(struct sk_buff *);`, or a block's closing `} name[4];`) and its place.
fn member(declaration: &str, (offset, bit, size): (u64, Option<u64>, u64)) -> Option<Node> {
    let declaration = without_attributes(declaration.trim().trim_end_matches(';'));
    let declaration = declaration.trim();
    let (declarator, width) = match declaration.rsplit_once(':') {
        Some((d, w)) if w.trim().parse::<u64>().is_ok() => {
            // `unsigned char :2`: an unnamed bit-field (a named one has no space before ':').
            let unnamed = d.ends_with(char::is_whitespace) || d.is_empty();
            (if unnamed { "" } else { d }, w.trim().parse().ok())
        }
        _ => (declaration, None),
    };
    let last = if let Some(at) = declarator.find("(*") {
        // A function pointer: `ret (*name)(args)`, or `ret (*name[4])(args)`.
        let rest = &declarator[at + 2..];
        &rest[..rest.find(')')?]
    } else {
        declarator
            .rsplit(|c: char| c.is_whitespace() || c == '*')
            .next()
            .unwrap_or("")
    };
    let (name, dims) = last
        .split_once('[')
        .map_or((last, None), |(n, d)| (n, Some(d)));
    let count = dims.map(|d| {
        d.split('[')
            .map(|dim| dim.trim_end_matches(']').parse::<u64>().unwrap_or(0))
            .product()
    });
    let named = !name.is_empty();
    if named && !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    Some(Node {
        name: named.then(|| name.to_owned()),
        offset,
        size,
        bits: match (bit, width) {
            (Some(b), Some(w)) => Some((b, w)),
            _ => None,
        },
        count,
        children: None,
    })
}

/// `declaration` without its `__attribute__((...))` parts.
fn without_attributes(declaration: &str) -> String {
    let mut out = declaration.to_owned();
    while let Some(at) = out.find("__attribute__") {
        let mut depth = 0usize;
        let mut end = out.len();
        for (i, c) in out[at..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = at + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.replace_range(at..end, " ");
    }
    out
}

#[test]
fn reads_members_bitfields_arrays_and_drops_repeated_types() {
    let text = "struct demo {
\tunsigned long              arch_data;            /*     0     8 */
\tlong                       (*fn)(struct demo *);  /*     8     8 */
\tunion {
\t\tstruct {
\t\t\t/* typedef u32 -> __u32 */ unsigned int val:20; /*    16: 0  4 */
\t\t\tunsigned int  :4;                         /*    16:20  4 */
\t\t\tunsigned int  more:8;                     /*    16:24  4 */
\t\t} __attribute__((__aligned__(8)))futex __attribute__((__aligned__(8))); /*    16     8 */
\t\tchar cb[8] __attribute__((__aligned__(8))); /*    16     8 */
\t};                                              /*    16     8 */
\tunion {
\t\tchar cb[8];                                /*     0     8 */
\t};

\t/* XXX 4 bytes hole, try to pack */

\tstruct hlist_node {
\t\tstruct hlist_node * next;                  /*    24     8 */
\t\tstruct hlist_node * * pprev;               /*    32     8 */
\t} pid_links[2]; /*    24    32 */
\tenum {
\t\tA = 0,
\t} state:16;                                     /*    56:16  4 */
\tunsigned char :0;

\t/* size: 64, cachelines: 1, members: 5 */
};
";
    let parsed = parse(text);
    assert_eq!(parsed.len(), 1);
    let s = &parsed[0];
    assert_eq!((s.name.as_str(), s.size), ("demo", Some(64)));
    let names: Vec<_> = s.members.iter().map(|m| m.name.as_deref()).collect();
    assert_eq!(
        names,
        [
            Some("arch_data"),
            Some("fn"),
            None,
            Some("pid_links"),
            Some("state")
        ]
    );
    let union = s.members[2].children.as_ref().expect("a union");
    let futex = &union[0];
    assert_eq!((futex.name.as_deref(), futex.offset), (Some("futex"), 16));
    let bits: Vec<_> = futex
        .children
        .as_ref()
        .expect("a struct")
        .iter()
        .map(|m| (m.name.as_deref(), m.bits))
        .collect();
    assert_eq!(
        bits,
        [
            (Some("val"), Some((0, 20))),
            (None, Some((20, 4))),
            (Some("more"), Some((24, 8)))
        ]
    );
    assert_eq!(
        (union[1].name.as_deref(), union[1].count),
        (Some("cb"), Some(8))
    );
    let links = &s.members[3];
    assert_eq!((links.count, links.size), (Some(2), 32));
    let pprev = &links.children.as_ref().expect("elements")[1];
    assert_eq!((pprev.name.as_deref(), pprev.offset), (Some("pprev"), 32));
    let state = &s.members[4];
    assert_eq!(
        (state.bits, state.children.is_none()),
        (Some((16, 16)), true)
    );
}
