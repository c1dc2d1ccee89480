//! Accesses typed from their instruction: the struct a memory operand's base register points
//! to, from the DWARF location of the variable the register holds at that ip (perf's
//! data-type method), beside the type the address resolved to. Present only with `--vmlinux`.

use serde::{Deserialize, Serialize};

/// What typing by instruction found, and how it compares with typing by address.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstructionTypes {
    /// Samples whose one memory operand is `disp(%base)`: a 64-bit base register other than
    /// `%rsp`, no index register (the ones the method can type).
    pub operand_samples: u64,
    /// Of them, the samples typed: a variable whose type points to a struct or union is
    /// located in the base register at the ip.
    pub typed_samples: u64,
    /// Of the typed samples, those whose address resolved to no type.
    pub typed_unknown: u64,
    /// Of the typed samples, those whose address resolved to a type split by allocation site
    /// (generic `kmalloc-N@site`, merged pools), which holds several structs.
    pub typed_generic: u64,
    /// Typed samples whose address resolved to a slab type with a known struct: the two
    /// resolvers were compared on them.
    pub compared_samples: u64,
    /// Of the compared samples, those where both name the same member: the instruction's
    /// struct is the cache's, or is embedded in it at that place.
    pub agreed_samples: u64,
    /// Each typed instruction, per type its address resolved to, most sampled first: the
    /// evidence of everything above.
    pub sites: Vec<InstructionSite>,
    /// Generic types (`kmalloc-N@site`) named by instruction: the struct most of their typed
    /// samples point to at the object's start.
    pub generic_types: Vec<GenericTyped>,
    /// Samples whose address resolved to nothing, by the struct their instruction points to,
    /// most first.
    pub unknown_by_struct: Vec<StructSamples>,
}

/// One instruction typed by its base register, for one type its address resolved to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstructionSite {
    /// The instruction's address.
    pub ip: u64,
    /// The function holding it.
    pub function: String,
    /// The type the address resolved to; `None`: no type.
    pub address_type: Option<String>,
    /// The offset of the address in that type's object or instance.
    pub offset: Option<u64>,
    /// The struct or union the base register points to.
    pub struct_name: String,
    /// The variable or parameter in the base register.
    pub variable: String,
    /// The operand's displacement: the offset in `struct_name`.
    pub displacement: i64,
    /// The member of `struct_name` at the displacement.
    pub field: Option<String>,
    /// Samples of this instruction and address type.
    pub samples: u64,
    /// Where both resolvers answered: whether they agree. `None`: not compared (the address
    /// resolved to no type, or to one whose struct is unknown or split by site).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agrees: Option<bool>,
    /// The address type's struct, when compared; the member it names at `offset`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_struct: Option<String>,
    /// The member the address type's struct has at `offset`, when compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_field: Option<String>,
}

/// A generic type whose struct came from its instructions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenericTyped {
    /// The type (`kmalloc-1k@__alloc_skb`).
    pub type_name: String,
    /// The struct most of its typed samples point to at the object's start.
    pub struct_name: String,
    /// Those samples.
    pub samples: u64,
    /// The type's samples typed by instruction, whatever struct.
    pub typed_samples: u64,
}

/// Samples of one struct.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StructSamples {
    /// The struct or union.
    pub struct_name: String,
    /// Samples.
    pub samples: u64,
}
