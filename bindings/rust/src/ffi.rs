//! The C API of `mimalloc.h` used by this crate, declared by hand (the parts
//! the safe wrappers need, and a few more that are handy from Rust).

#![allow(non_camel_case_types)]

use core::ffi::c_void;
use std::os::raw::{c_char, c_int, c_long};

/// An opaque `mi_heap_t`.
#[repr(C)]
pub struct mi_heap_t {
    _private: [u8; 0],
}

/// `mi_heap_area_t`: an area of a heap whose blocks all have one size.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mi_heap_area_t {
    pub blocks: *mut c_void,
    pub reserved: usize,
    pub committed: usize,
    pub used: usize,
    pub block_size: usize,
}

pub type mi_output_fun = unsafe extern "C" fn(msg: *const c_char, arg: *mut c_void);
pub type mi_block_visit_fun = unsafe extern "C" fn(
    heap: *const mi_heap_t,
    area: *const mi_heap_area_t,
    block: *mut c_void,
    block_size: usize,
    arg: *mut c_void,
) -> bool;

/// `mi_option_t` values, in the order of the C enum.
pub type mi_option_t = c_int;

extern "C" {
    pub fn mi_malloc(size: usize) -> *mut c_void;
    pub fn mi_zalloc(size: usize) -> *mut c_void;
    pub fn mi_realloc(p: *mut c_void, newsize: usize) -> *mut c_void;
    pub fn mi_free(p: *mut c_void);
    pub fn mi_malloc_aligned(size: usize, alignment: usize) -> *mut c_void;
    pub fn mi_zalloc_aligned(size: usize, alignment: usize) -> *mut c_void;
    pub fn mi_realloc_aligned(p: *mut c_void, newsize: usize, alignment: usize) -> *mut c_void;
    pub fn mi_usable_size(p: *const c_void) -> usize;
    pub fn mi_good_size(size: usize) -> usize;
    pub fn mi_is_in_heap_region(p: *const c_void) -> bool;
    pub fn mi_check_owned(p: *const c_void) -> bool;

    pub fn mi_collect(force: bool);
    pub fn mi_version() -> c_int;
    pub fn mi_stats_reset();
    pub fn mi_stats_merge();
    pub fn mi_stats_print_out(out: Option<mi_output_fun>, arg: *mut c_void);
    pub fn mi_thread_stats_print_out(out: Option<mi_output_fun>, arg: *mut c_void);
    pub fn mi_process_info(
        elapsed_msecs: *mut usize,
        user_msecs: *mut usize,
        system_msecs: *mut usize,
        current_rss: *mut usize,
        peak_rss: *mut usize,
        current_commit: *mut usize,
        peak_commit: *mut usize,
        page_faults: *mut usize,
    );

    pub fn mi_heap_new() -> *mut mi_heap_t;
    pub fn mi_heap_delete(heap: *mut mi_heap_t);
    pub fn mi_heap_destroy(heap: *mut mi_heap_t);
    pub fn mi_heap_collect(heap: *mut mi_heap_t, force: bool);
    pub fn mi_heap_malloc(heap: *mut mi_heap_t, size: usize) -> *mut c_void;
    pub fn mi_heap_zalloc(heap: *mut mi_heap_t, size: usize) -> *mut c_void;
    pub fn mi_heap_malloc_aligned(heap: *mut mi_heap_t, size: usize, alignment: usize) -> *mut c_void;
    pub fn mi_heap_zalloc_aligned(heap: *mut mi_heap_t, size: usize, alignment: usize) -> *mut c_void;
    pub fn mi_heap_realloc_aligned(heap: *mut mi_heap_t, p: *mut c_void, newsize: usize, alignment: usize) -> *mut c_void;
    pub fn mi_heap_contains_block(heap: *mut mi_heap_t, p: *const c_void) -> bool;
    pub fn mi_heap_check_owned(heap: *mut mi_heap_t, p: *const c_void) -> bool;
    pub fn mi_heap_visit_blocks(
        heap: *const mi_heap_t,
        visit_all_blocks: bool,
        visitor: Option<mi_block_visit_fun>,
        arg: *mut c_void,
    ) -> bool;

    pub fn mi_option_get(option: mi_option_t) -> c_long;
    pub fn mi_option_set(option: mi_option_t, value: c_long);
}
