//! Encoded bytes of each instruction, checked against the eBPF
//! instruction-set encoding (opcode = class | size/op | mode/source; regs
//! byte = dst | src << 4 on little-endian hosts; off and imm little endian).

use super::*;

fn bytes(i: Insn) -> [u8; 8] {
    i.to_bytes()
}

#[test]
fn insn_is_eight_bytes() {
    assert_eq!(std::mem::size_of::<Insn>(), 8);
}

#[cfg(target_endian = "little")]
mod little_endian {
    use super::*;

    #[test]
    fn ldx_mem_sizes() {
        // BPF_LDX | BPF_MEM | BPF_W = 0x61
        assert_eq!(
            bytes(ldx_mem(Size::W, Reg::R2, Reg::R1, 16)),
            [0x61, 0x12, 0x10, 0x00, 0, 0, 0, 0]
        );
        // BPF_H = 0x08, BPF_B = 0x10, BPF_DW = 0x18
        assert_eq!(
            bytes(ldx_mem(Size::H, Reg::R3, Reg::R4, 2))[..2],
            [0x69, 0x43]
        );
        assert_eq!(
            bytes(ldx_mem(Size::B, Reg::R0, Reg::R1, 0))[..2],
            [0x71, 0x10]
        );
        // negative offset from the frame pointer: off = -8 = 0xfff8
        assert_eq!(
            bytes(ldx_mem(Size::DW, Reg::R0, Reg::R10, -8)),
            [0x79, 0xa0, 0xf8, 0xff, 0, 0, 0, 0]
        );
    }

    #[test]
    fn ld_imm64_two_slots() {
        let [a, b] = ld_imm64(Reg::R0, 0x1122_3344_5566_7788);
        assert_eq!(bytes(a), [0x18, 0x00, 0, 0, 0x88, 0x77, 0x66, 0x55]);
        assert_eq!(bytes(b), [0x00, 0x00, 0, 0, 0x44, 0x33, 0x22, 0x11]);
    }

    #[test]
    fn ld_map_fd_sets_pseudo_src() {
        let [a, b] = ld_map_fd(Reg::R1, 5);
        // src_reg = BPF_PSEUDO_MAP_FD (1), dst_reg = r1
        assert_eq!(bytes(a), [0x18, 0x11, 0, 0, 5, 0, 0, 0]);
        assert_eq!(bytes(b), [0; 8]);
        assert_eq!(a.dst(), 1);
        assert_eq!(a.src(), BPF_PSEUDO_MAP_FD);
    }

    #[test]
    fn alu64() {
        // BPF_ALU64 | BPF_MOV | BPF_K = 0xb7
        assert_eq!(
            bytes(mov64_imm(Reg::R3, XDP_PASS)),
            [0xb7, 0x03, 0, 0, 2, 0, 0, 0]
        );
        assert_eq!(
            bytes(mov64_imm(Reg::R0, -1)),
            [0xb7, 0x00, 0, 0, 0xff, 0xff, 0xff, 0xff]
        );
        // BPF_ALU64 | BPF_MOV | BPF_X = 0xbf
        assert_eq!(
            bytes(mov64_reg(Reg::R6, Reg::R1)),
            [0xbf, 0x16, 0, 0, 0, 0, 0, 0]
        );
        // BPF_ALU64 | BPF_ADD | BPF_K = 0x07
        assert_eq!(bytes(add64_imm(Reg::R1, 8)), [0x07, 0x01, 0, 0, 8, 0, 0, 0]);
    }

    #[test]
    fn jumps_call_exit() {
        // BPF_JMP | BPF_JEQ | BPF_K = 0x15
        assert_eq!(
            bytes(jeq_imm(Reg::R0, 0, 2)),
            [0x15, 0x00, 2, 0, 0, 0, 0, 0]
        );
        // BPF_JMP | BPF_JA = 0x05, off = -1
        assert_eq!(bytes(ja(-1)), [0x05, 0x00, 0xff, 0xff, 0, 0, 0, 0]);
        // BPF_JMP | BPF_CALL = 0x85, imm = helper id
        assert_eq!(
            bytes(call(BPF_FUNC_REDIRECT_MAP)),
            [0x85, 0x00, 0, 0, 51, 0, 0, 0]
        );
        // BPF_JMP | BPF_EXIT = 0x95
        assert_eq!(bytes(exit()), [0x95, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn redirect_program_bytes() {
        let p = redirect_program(7);
        assert_eq!(p.len(), 6);
        let expected: [[u8; 8]; 6] = [
            [0x61, 0x12, 16, 0, 0, 0, 0, 0], // r2 = *(u32 *)(r1 + 16)
            [0x18, 0x11, 0, 0, 7, 0, 0, 0],  // r1 = map fd 7
            [0, 0, 0, 0, 0, 0, 0, 0],        //   (upper half)
            [0xb7, 0x03, 0, 0, 2, 0, 0, 0],  // r3 = XDP_PASS
            [0x85, 0x00, 0, 0, 51, 0, 0, 0], // call bpf_redirect_map
            [0x95, 0, 0, 0, 0, 0, 0, 0],     // exit
        ];
        assert_eq!(to_bytes(&p), expected.concat());
    }
}

#[test]
fn register_accessors_round_trip() {
    let i = mov64_reg(Reg::R9, Reg::R10);
    assert_eq!(i.dst(), 9);
    assert_eq!(i.src(), 10);
}

#[test]
fn redirect_program_reads_queue_index_before_loading_map() {
    let p = redirect_program(3);
    // r1 (ctx) must be read before the map pointer overwrites it.
    assert_eq!(p[0].dst(), Reg::R2 as u8);
    assert_eq!(p[0].src(), Reg::R1 as u8);
    assert_eq!(p[0].off, XDP_MD_RX_QUEUE_INDEX);
    assert_eq!(p[1].dst(), Reg::R1 as u8);
    assert_eq!(p[1].imm, 3);
}
