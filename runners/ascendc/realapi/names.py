"""The names our stand-in `stub_fun.h` declares: the low-level CCE intrinsics, the types and
enumerations they take, and the CPU-debug checker hooks, all of which CANN ships only inside
binary packages (docs/ascend-toolchain.md, "Checking against the real API without CANN").

Collected by compiling the golden kernels against the real devkit headers with an empty
`stub_fun.h` and reading g++'s "not declared" errors; kept as data so the header, the tests
and the CPU model all agree on one list. Only names matter for a type check: every intrinsic is
declared as a variadic template returning an integer, so any call compiles; the enumerator
values are ours (distinct is all the headers need), not CANN's.
"""

from __future__ import annotations

# Unscoped enumerations (the headers use both `PIPE_V` and `pipe_t::PIPE_V`), name -> members.
ENUMS: dict[str, tuple[str, ...]] = {
    "pipe_t": ("PIPE_S", "PIPE_V", "PIPE_M", "PIPE_MTE1", "PIPE_MTE2", "PIPE_MTE3",
               "PIPE_ALL", "PIPE_MTE4", "PIPE_MTE5", "PIPE_V2", "PIPE_FIX"),
    "event_t": tuple(f"EVENT_ID{i}" for i in range(8)),
    "QuantMode_t": (
        "NoQuant", "F322F16", "F322BF16", "DEQF16", "VDEQF16", "DEQS16", "VDEQS16",
        "REQ8", "VREQ8", "REQ4", "VREQ4",
        "QF322B8_PRE", "VQF322B8_PRE", "QF322F16_PRE", "VQF322F16_PRE",
        "QF322BF16_PRE", "VQF322BF16_PRE", "QF322F32_PRE", "VQF322F32_PRE",
        "QF322FP8_PRE", "VQF322FP8_PRE", "QF322HIF8_PRE", "VQF322HIF8_PRE",
        "QF322HIF8_PRE_HYBRID", "VQF322HIF8_PRE_HYBRID", "QS322BF16_PRE", "VQS322BF16_PRE",
        "QF162B8_PRE", "VQF162B8_PRE", "QF162S16_PRE", "VQF162S16_PRE",
        "QF162S4_PRE", "VQF162S4_PRE"),
    "Order_t": ("VALUE_INDEX", "INDEX_VALUE", "ONLY_VALUE", "ONLY_INDEX"),
    "pad_t": ("PAD_NONE", "PAD_MODE1", "PAD_MODE2", "PAD_MODE3", "PAD_MODE4", "PAD_MODE5"),
    "mem_t": ("MEM_L1", "MEM_UB", "MEM_GM"),
    "mem_dsb_t": ("DSB_ALL", "DSB_DDR", "DSB_UB", "DSB_SEQ"),
    "atomic_type_t": ("ATOMIC_NONE_TYPE", "ATOMIC_F32", "ATOMIC_F16", "ATOMIC_S16",
                      "ATOMIC_S32", "ATOMIC_S8", "ATOMIC_BF16"),
    "atomic_op_t": ("ATOMIC_NONE_OP", "ATOMIC_SUM", "ATOMIC_MAX", "ATOMIC_MIN"),
    "cache_line_t": ("SINGLE_CACHE_LINE", "ENTIRE_DATA_CACHE"),
    "dcci_dst_t": ("CACHELINE_ALL", "CACHELINE_UB", "CACHELINE_OUT", "CACHELINE_ATOMIC"),
    "addr_cal_mode_t": ("inc", "dec"),
    "ub_addr8_t": tuple(f"VA{i}" for i in range(8)),
    "vpart_t": ("L128", "H128"),
}

# The CPU-debug library's checker hooks (libcpudebug_npuchk), called by the TPipe/TQue code.
CHECKER_HOOKS: tuple[str, ...] = (
    "AscendCBufAbsAddr", "AscendCBufAlloc", "AscendCBufDeque", "AscendCBufEnque",
    "AscendCBufFree", "AscendCBufGet", "AscendCBufInit", "AscendCQueCreate",
    "AscendCRecordPoolHierarchy", "AscendCTBufPoolInit", "AscendCTBufPoolResetCheck",
    "AscendCUpdateTbufPoolStatus",
)

# Synchronisation, system registers and other scalar-side intrinsics.
_SYSTEM = (
    "__ib_set_stub", "__ib_wait_stub", "__sync_all_stub",
    "bcnt0", "bcnt1", "clz", "dc_preload", "dcci", "dsb", "ffts_cross_core_sync",
    "get_acc_val", "get_arch_ver", "get_block_idx", "get_block_num", "get_ctrl",
    "get_icache_prl_st", "get_max_min_cnt", "get_pc", "get_rsvd_cnt", "get_st_atomic_cfg",
    "get_vms4_sr", "hset_flag", "hwait_flag", "ld_dev", "pipe_barrier", "preload",
    "sbitset0", "sbitset1", "set_ctrl", "set_ffts_base_addr", "set_flag", "set_fpc",
    "set_st_atomic_cfg", "sff0", "sff1", "sflbits", "st_dev", "trap", "wait_flag",
    "wait_flag_dev",
    "__mstx_dfx_report_stub", "get_buf", "get_cmpmask", "get_condition_flag", "get_coreid",
    "get_ffts_base_addr", "get_fpc", "get_imm", "get_l2_in_main", "get_l2_vaddr_base",
    "get_lpcnt", "get_overflow_status", "get_para_base", "get_stack_phy_base", "get_status",
    "get_subblockdim", "get_subblockid", "get_thread_dim", "get_thread_id", "rls_buf",
    "set_condition_flag", "set_lpcnt", "set_pcie_rd_ctrl", "set_ub_addr_upper_bound",
)

# Atomic modes, masks and the vector unit's mode registers.
_MODES = (
    "set_atomic_add", "set_atomic_bf16", "set_atomic_f16", "set_atomic_f32", "set_atomic_max",
    "set_atomic_min", "set_atomic_none", "set_atomic_s16", "set_atomic_s32", "set_atomic_s8",
    "set_cmpmask", "set_deqscale", "set_mask_count", "set_mask_norm", "set_mov_pad_val",
    "set_nd_para", "set_padding", "set_quant_pre", "set_va_reg_sb", "set_vector_mask",
    "vld_va_reg",
    "set_aipp_spr_0", "set_aipp_spr_1", "set_aipp_spr_2", "set_aipp_spr_3", "set_aipp_spr_4",
    "set_aipp_spr_5", "set_aipp_spr_6", "set_aipp_spr_7", "set_aipp_spr_8", "set_aipp_spr_9",
    *(f"set_aipp_spr_{index}" for index in range(10, 25)),
    "set_lrelu_alpha", "set_loop_size_outtoub", "set_loop_size_ubtoout",
    "set_pad_val_outtol1", "set_pad_val_outtoub", "set_l0_set_value_bf16",
    "set_l0_set_value_h", "set_l0a_2d", "set_l0b_2d", "set_l1_2d",
    "set_data_exp_0", "set_data_exp_1", "set_data_exp_2", "set_data_exp_3",
    "set_fmatrix", "set_fmatrix_b", "set_l1_3d_size", "set_l3d_rpt",
)

# Data movement between GM, UB and the cube buffers.
_COPIES = (
    "copy_cbuf_to_bt", "copy_cbuf_to_fbuf", "copy_cbuf_to_gm", "copy_gm_to_cbuf",
    "copy_gm_to_cbuf_multi_nd2nz_b16", "copy_gm_to_cbuf_multi_nd2nz_b32s",
    "copy_gm_to_cbuf_multi_nd2nz_b8", "copy_gm_to_ubuf", "copy_gm_to_ubuf_align_b16",
    "copy_gm_to_ubuf_align_b32", "copy_ubuf_to_gm", "copy_ubuf_to_gm_align_b16",
    "copy_ubuf_to_gm_align_b32", "copy_ubuf_to_ubuf", "create_cbuf_matrix",
    "img2colv2_cbuf_to_ca", "img2colv2_cbuf_to_ca_s4", "img2colv2_cbuf_to_cb",
    "load_cbuf_to_ca_s4", "load_cbuf_to_cb_s4", "load_cbuf_to_cb_sp",
    "load_cbuf_to_cb_transpose_s4", "mad_sp",
    "scatter_vnchwconv_b16", "scatter_vnchwconv_b32", "scatter_vnchwconv_b8",
    "copy_gm_to_ubuf_align_b8", "copy_ubuf_to_gm_align_b8", "copy_matrix_cbuf_to_cc",
    "copy_matrix_cc_to_cbuf", "copy_matrix_cc_to_gm", "create_ca_matrix",
    "create_ca_matrix_bf16", "create_cb_matrix", "create_cb_matrix_bf16",
    "create_cbuf_matrix_bf16", "img2colv2_cbuf_to_ub", "load_cbuf_to_ca",
    "load_cbuf_to_ca_transpose", "load_cbuf_to_cb", "load_cbuf_to_cb_transpose",
    "load_gm_to_ca", "load_gm_to_cb", "load_gm_to_cbuf", "load_image_to_cbuf", "mad",
    "mad_s4",
)

# Vector arithmetic, comparison, selection and reduction.
_VECTOR = (
    "vabs", "vadd", "vadds", "vand", "vbrcb", "vcadd", "vcgadd", "vcgmax", "vcmax",
    "vcmpv_eq", "vcmpv_ge", "vcmpv_gt", "vcmpv_le", "vcmpv_lt", "vcmpv_ne",
    "vcmpvs_eq", "vcmpvs_ge", "vcmpvs_gt", "vcmpvs_le", "vcmpvs_lt", "vcmpvs_ne",
    "vcopy", "vdiv", "vector_dup", "vexp", "vgather", "vln", "vmax", "vmaxs", "vmin",
    "vmins", "vmul", "vmuls", "vnot", "vor", "vrec", "vreducev2", "vrelu", "vsel", "vshr",
    "vsqrt", "vsub", "vtranspose",
    "vaddrelu", "vaxpy", "vbitsort", "vcgmin", "vcmin", "vcmp_eq", "vcmp_ge", "vcmp_gt",
    "vcmp_le", "vcmp_lt", "vcmp_ne", "vcpadd", "vgatherb", "vlrelu", "vmadd", "vmaddrelu",
    "vmla", "vmrgsort4", "vrsqrt", "vshl", "vsubrelu",
    "vaddreluconv_f162s8", "vaddreluconv_f322f16", "vaddreluconv_s162s8",
    "vaddreluconv_vdeqs162b8", "vsubreluconv_f162s8", "vsubreluconv_f322f16",
    "vsubreluconv_s162s8",
)

# Rounding suffixes of the conversions: a(way from zero), c(eil), f(loor), r(int), z(ero),
# o(dd); the bare name rounds the default way.
_ROUNDINGS = ("", "a", "c", "f", "r", "z")


def _conversions() -> tuple[str, ...]:
    """vconv_<from>2<to><rounding>, the scalar conv_ ones, and vmulconv."""
    rounded = ("f162s16", "f162s32", "f162s4", "f162s8", "f162u8", "f322bf16", "f322f16",
               "f322f32", "f322s16", "f322s32", "f322s64", "s162f16", "s322f32", "s642f32",
               "bf162s32")
    plain = ("bf162f32", "deq", "f162f32", "f322f16o", "s162f32", "s322s16", "s322s64",
             "s42f16", "s642s32", "s82f16", "u82f16", "deqs162b8h", "deqs162b8l",
             "vdeqs162b8h", "vdeqs162b8l")
    names = {f"vconv_{pair}{mode}" for pair in rounded for mode in _ROUNDINGS}
    names |= {f"vconv_{pair}" for pair in plain}
    names |= {"conv_f322f16o", "conv_f322s32a", "conv_f322s32c", "conv_f322s32f",
              "conv_f322s32r", "vmulconv_f162s8", "vmulconv_f162u8"}
    return tuple(sorted(names))


INTRINSICS: tuple[str, ...] = tuple(sorted({*_SYSTEM, *_MODES, *_COPIES, *_VECTOR,
                                            *_conversions()}))


def all_names() -> tuple[str, ...]:
    """Every name the header declares (types, enumerators, intrinsics, hooks)."""
    enumerators = [member for members in ENUMS.values() for member in members]
    return (*ENUMS, *enumerators, *INTRINSICS, *CHECKER_HOOKS)
