//! Which C struct a slab cache's objects are: a user mapping, then a built-in table of common
//! caches, then a cache whose name is itself a struct name (when debug info can tell).

use std::collections::BTreeMap;

use crate::debuginfo::VariableType;

/// Common caches whose name is not their struct's name (`None`: no struct, e.g. raw buffers).
const BUILTIN: &[(&str, Option<&str>)] = &[
    ("skbuff_head_cache", Some("sk_buff")),
    ("skbuff_small_head", None),
    ("skbuff_fclone_cache", Some("sk_buff_fclones")),
    ("skbuff_ext_cache", Some("skb_ext")),
    ("TCP", Some("tcp_sock")),
    ("TCPv6", Some("tcp6_sock")),
    ("UDP", Some("udp_sock")),
    ("UDPv6", Some("udp6_sock")),
    ("UDP-Lite", Some("udp_sock")),
    ("RAW", Some("raw_sock")),
    ("RAWv6", Some("raw6_sock")),
    ("UNIX", Some("unix_sock")),
    ("UNIX-STREAM", Some("unix_sock")),
    ("request_sock_TCP", Some("tcp_request_sock")),
    ("tw_sock_TCP", Some("tcp_timewait_sock")),
    ("tcp_bind_bucket", Some("inet_bind_bucket")),
    ("ip_dst_cache", Some("rtable")),
    ("ip6_dst_cache", Some("rt6_info")),
    ("inet_peer_cache", Some("inet_peer")),
    ("filp", Some("file")),
    ("task_struct", Some("task_struct")),
    ("mm_struct", Some("mm_struct")),
    ("vm_area_struct", Some("vm_area_struct")),
    ("dentry", Some("dentry")),
    ("inode_cache", Some("inode")),
    ("proc_inode_cache", Some("proc_inode")),
    ("shmem_inode_cache", Some("shmem_inode_info")),
    ("ext4_inode_cache", Some("ext4_inode_info")),
    ("sock_inode_cache", Some("socket_alloc")),
    ("bdev_cache", Some("bdev_inode")),
    ("signal_cache", Some("signal_struct")),
    ("sighand_cache", Some("sighand_struct")),
    ("files_cache", Some("files_struct")),
    ("fs_cache", Some("fs_struct")),
    ("cred", Some("cred")),
    ("cred_jar", Some("cred")),
    ("pid", Some("pid")),
    ("anon_vma", Some("anon_vma")),
    ("anon_vma_chain", Some("anon_vma_chain")),
    ("names_cache", None),
    ("radix_tree_node", Some("xa_node")),
    ("maple_node", Some("maple_node")),
    ("kernfs_node_cache", Some("kernfs_node")),
    ("kernfs_iattrs_cache", Some("kernfs_iattrs")),
    ("mnt_cache", Some("mount")),
    ("uid_cache", Some("user_struct")),
    ("key_jar", Some("key")),
    ("file_lock_cache", Some("file_lock")),
    ("fasync_cache", Some("fasync_struct")),
    ("eventpoll_epi", Some("epitem")),
    ("eventpoll_pwq", Some("eppoll_entry")),
    ("sigqueue", Some("sigqueue")),
    ("seq_file", Some("seq_file")),
    ("perf_event", Some("perf_event")),
    ("vmap_area", Some("vmap_area")),
    ("buffer_head", Some("buffer_head")),
    ("nsproxy", Some("nsproxy")),
    ("net_namespace", Some("net")),
    ("task_delay_info", Some("task_delay_info")),
    ("io_kiocb", Some("io_kiocb")),
    ("dprof_selftest_obj", Some("dprof_selftest_obj")),
];

/// Why a user type map could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TypeMapError {
    /// A line that is not `cache=struct`.
    #[error(
        "line {line} of the type map is not `cache=struct` (or `cache=` for no struct): {text:?}"
    )]
    Syntax {
        /// 1-based line number.
        line: usize,
        /// The line.
        text: String,
    },
}

/// Cache name to struct name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StructNames {
    user: BTreeMap<String, Option<String>>,
}

impl StructNames {
    /// The built-in table only.
    #[must_use]
    pub fn builtin() -> Self {
        Self::default()
    }

    /// Adds a user mapping: lines `cache=struct`, `cache=` (no struct), `#` comments and blank
    /// lines. User entries take precedence over the built-in table.
    ///
    /// # Errors
    /// [`TypeMapError::Syntax`] for the first malformed line.
    pub fn add_user_map(&mut self, text: &str) -> Result<(), TypeMapError> {
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let syntax = || TypeMapError::Syntax {
                line: i + 1,
                text: raw.to_owned(),
            };
            let (cache, st) = line.split_once('=').ok_or_else(syntax)?;
            let (cache, st) = (cache.trim(), st.trim());
            let ident = |s: &str| s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if cache.is_empty() || cache.contains(char::is_whitespace) || !ident(st) {
                return Err(syntax());
            }
            self.user
                .insert(cache.to_owned(), (!st.is_empty()).then(|| st.to_owned()));
        }
        Ok(())
    }

    /// The struct of cache `cache`: the user map, the built-in table, else the cache name
    /// itself when `fields` knows a struct of that name.
    #[must_use]
    pub fn struct_for(&self, cache: &str, fields: Option<&dyn FieldSource>) -> Option<String> {
        if let Some(st) = self.user.get(cache) {
            return st.clone();
        }
        if let Some((_, st)) = BUILTIN.iter().find(|(c, _)| *c == cache) {
            return st.map(str::to_owned);
        }
        fields
            .filter(|f| f.has_struct(cache))
            .map(|_| cache.to_owned())
    }
}

/// Field names from debug info (implemented over DWARF of vmlinux and modules, and over the
/// kernel's BTF: [`crate::btf::Btf`]).
pub trait FieldSource {
    /// Whether a struct of this name is known.
    fn has_struct(&self, name: &str) -> bool;
    /// The field of `struct_name` at byte `offset` (a dotted path for nested structs, with
    /// `[i]` for arrays), if any.
    fn field_at(&self, struct_name: &str, offset: u64) -> Option<String>;
    /// The members of `struct_name` that hold byte `offset`, at any depth, union members all
    /// included (dotted paths as [`Self::field_at`] gives them, without array elements). By
    /// default the one [`Self::field_at`] names.
    fn fields_holding(&self, struct_name: &str, offset: u64) -> Vec<String> {
        self.field_at(struct_name, offset).into_iter().collect()
    }
    /// The type of global or per-CPU variable `name`, as far as naming its bytes needs;
    /// `None` for an array of structs, an unknown variable, or variables of one name whose
    /// types differ (by default every one).
    fn variable_type(&self, _name: &str) -> Option<VariableType> {
        None
    }
}
