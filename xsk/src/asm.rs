//! A tiny eBPF assembler: the instructions the redirect program needs (and a
//! few neighbours), encoded as the kernel's `struct bpf_insn`:
//!
//! ```text
//! byte 0      opcode  (class | size/op | mode/source)
//! byte 1      dst_reg in the low nibble, src_reg in the high nibble
//!             (on little-endian hosts; swapped on big-endian ones)
//! bytes 2..4  off     (i16, little endian on little-endian hosts)
//! bytes 4..8  imm     (i32, idem)
//! ```
//!
//! `ld_imm64` is the one two-slot instruction: the second slot holds the
//! upper 32 bits of the immediate with every other field zero.

/// eBPF registers r0..r10 (r10 is the read-only frame pointer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Reg {
    R0 = 0,
    R1,
    R2,
    R3,
    R4,
    R5,
    R6,
    R7,
    R8,
    R9,
    R10,
}

/// Memory access sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// 1 byte.
    B,
    /// 2 bytes.
    H,
    /// 4 bytes.
    W,
    /// 8 bytes.
    DW,
}

impl Size {
    fn bits(self) -> u8 {
        match self {
            Size::W => 0x00,
            Size::H => 0x08,
            Size::B => 0x10,
            Size::DW => 0x18,
        }
    }
}

// Instruction classes.
const BPF_LD: u8 = 0x00;
const BPF_LDX: u8 = 0x01;
const BPF_JMP: u8 = 0x05;
const BPF_ALU64: u8 = 0x07;
// Modes.
const BPF_IMM: u8 = 0x00;
const BPF_MEM: u8 = 0x60;
// ALU / jump operations and the source bit.
const BPF_K: u8 = 0x00;
const BPF_X: u8 = 0x08;
const BPF_ADD: u8 = 0x00;
const BPF_MOV: u8 = 0xb0;
const BPF_JA: u8 = 0x00;
const BPF_JEQ: u8 = 0x10;
const BPF_CALL: u8 = 0x80;
const BPF_EXIT: u8 = 0x90;

/// `src_reg` of an `ld_imm64` whose immediate is a map file descriptor the
/// kernel replaces with the map's address.
pub const BPF_PSEUDO_MAP_FD: u8 = 1;

/// Helper function ids (enum bpf_func_id).
pub const BPF_FUNC_REDIRECT_MAP: i32 = 51;

/// XDP actions (enum xdp_action).
pub const XDP_ABORTED: i32 = 0;
pub const XDP_DROP: i32 = 1;
pub const XDP_PASS: i32 = 2;
pub const XDP_TX: i32 = 3;
pub const XDP_REDIRECT: i32 = 4;

/// Offset of `rx_queue_index` in `struct xdp_md` (data, data_end,
/// data_meta, ingress_ifindex, rx_queue_index: five u32s).
pub const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

/// The register byte: the C bitfields `dst_reg:4, src_reg:4` put dst in
/// the low nibble on little-endian hosts and in the high nibble on
/// big-endian ones.
fn pack_regs(dst: u8, src: u8) -> u8 {
    if cfg!(target_endian = "little") {
        (dst & 0x0f) | (src << 4)
    } else {
        (dst << 4) | (src & 0x0f)
    }
}

/// One eBPF instruction slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(C)]
pub struct Insn {
    pub code: u8,
    /// dst_reg and src_reg, one nibble each (see [`Insn::dst`]).
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    fn new(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            regs: pack_regs(dst as u8, src as u8),
            off,
            imm,
        }
    }

    pub fn dst(self) -> u8 {
        if cfg!(target_endian = "little") {
            self.regs & 0x0f
        } else {
            self.regs >> 4
        }
    }

    pub fn src(self) -> u8 {
        if cfg!(target_endian = "little") {
            self.regs >> 4
        } else {
            self.regs & 0x0f
        }
    }

    /// The 8 bytes the kernel reads (host byte order for `off` and `imm`,
    /// as `struct bpf_insn` is laid out in memory).
    pub fn to_bytes(self) -> [u8; 8] {
        let off = self.off.to_ne_bytes();
        let imm = self.imm.to_ne_bytes();
        [
            self.code, self.regs, off[0], off[1], imm[0], imm[1], imm[2], imm[3],
        ]
    }
}

/// `dst = imm` (64-bit, sign-extended).
pub fn mov64_imm(dst: Reg, imm: i32) -> Insn {
    Insn::new(BPF_ALU64 | BPF_MOV | BPF_K, dst, Reg::R0, 0, imm)
}

/// `dst = src` (64-bit).
pub fn mov64_reg(dst: Reg, src: Reg) -> Insn {
    Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0)
}

/// `dst += imm` (64-bit).
pub fn add64_imm(dst: Reg, imm: i32) -> Insn {
    Insn::new(BPF_ALU64 | BPF_ADD | BPF_K, dst, Reg::R0, 0, imm)
}

/// `dst = *(size *)(src + off)`.
pub fn ldx_mem(size: Size, dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::new(BPF_LDX | BPF_MEM | size.bits(), dst, src, off, 0)
}

/// `dst = imm64`: two slots.
pub fn ld_imm64(dst: Reg, imm: u64) -> [Insn; 2] {
    [
        Insn::new(
            BPF_LD | BPF_IMM | Size::DW.bits(),
            dst,
            Reg::R0,
            0,
            imm as u32 as i32,
        ),
        Insn {
            imm: (imm >> 32) as u32 as i32,
            ..Insn::default()
        },
    ]
}

/// `dst = &map` for the map whose descriptor is `fd`: an `ld_imm64` with
/// `src_reg = BPF_PSEUDO_MAP_FD`.
pub fn ld_map_fd(dst: Reg, fd: i32) -> [Insn; 2] {
    let [mut first, second] = ld_imm64(dst, fd as u32 as u64);
    first.regs = pack_regs(dst as u8, BPF_PSEUDO_MAP_FD);
    [first, second]
}

/// `if dst == imm goto pc + 1 + off`.
pub fn jeq_imm(dst: Reg, imm: i32, off: i16) -> Insn {
    Insn::new(BPF_JMP | BPF_JEQ | BPF_K, dst, Reg::R0, off, imm)
}

/// `goto pc + 1 + off`.
pub fn ja(off: i16) -> Insn {
    Insn::new(BPF_JMP | BPF_JA, Reg::R0, Reg::R0, off, 0)
}

/// `call helper` (arguments in r1..r5, result in r0).
pub fn call(helper: i32) -> Insn {
    Insn::new(BPF_JMP | BPF_CALL, Reg::R0, Reg::R0, 0, helper)
}

/// `return r0`.
pub fn exit() -> Insn {
    Insn::new(BPF_JMP | BPF_EXIT, Reg::R0, Reg::R0, 0, 0)
}

/// The XDP program every AF_XDP port loads: redirect each packet to the
/// socket in the XSKMAP (`map_fd`) at its receive queue's index, or pass it
/// to the stack when that slot is empty.
///
/// ```text
/// r2 = *(u32 *)(r1 + 16)        ; key = ctx->rx_queue_index (before r1 is reused)
/// r1 = map_fd ll                ; map (ld_imm64, BPF_PSEUDO_MAP_FD)
/// r3 = XDP_PASS                 ; flags: action when the lookup fails (≥ 5.3)
/// call bpf_redirect_map         ; r0 = XDP_REDIRECT or XDP_PASS
/// exit
/// ```
pub fn redirect_program(map_fd: i32) -> Vec<Insn> {
    let mut p = Vec::with_capacity(6);
    p.push(ldx_mem(Size::W, Reg::R2, Reg::R1, XDP_MD_RX_QUEUE_INDEX));
    p.extend_from_slice(&ld_map_fd(Reg::R1, map_fd));
    p.push(mov64_imm(Reg::R3, XDP_PASS));
    p.push(call(BPF_FUNC_REDIRECT_MAP));
    p.push(exit());
    p
}

/// The program's bytes, as `BPF_PROG_LOAD` reads them.
pub fn to_bytes(prog: &[Insn]) -> Vec<u8> {
    prog.iter().flat_map(|i| i.to_bytes()).collect()
}

#[cfg(test)]
#[path = "tests/asm.rs"]
mod tests;
