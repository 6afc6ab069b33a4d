//! The mimalloc allocator of this repository for Rust.
//!
//! The crate builds the C library from the repository's sources (with the `cc`
//! crate; no symbol override, so C code in the program keeps the system
//! `malloc`) and offers:
//!
//! - [`MiMalloc`], a [`GlobalAlloc`]: every Rust allocation of the program
//!   goes to mimalloc;
//! - [`Heap`], a first-class heap (`mi_heap_new`) that is deleted when
//!   dropped, and [`HeapBox`], a value allocated in one;
//! - [`stats`]: the statistics table and the process figures;
//! - a few functions of the C API ([`usable_size`], [`collect`], ...) and the
//!   raw declarations in [`ffi`].
//!
//! ```
//! use mimalloc::MiMalloc;
//!
//! #[global_allocator]
//! static GLOBAL: MiMalloc = MiMalloc;
//!
//! fn main() {
//!     let v: Vec<u64> = (0..1000).collect();
//!     assert!(mimalloc::is_in_heap_region(v.as_ptr() as *const u8));
//!
//!     let heap = mimalloc::Heap::new();
//!     let b = heap.boxed([7u8; 100]);
//!     assert!(heap.contains(&*b as *const _ as *const u8));
//!     drop(b);
//!     drop(heap); // mi_heap_delete
//!
//!     let table = mimalloc::stats::to_string();
//!     assert!(table.contains("heap stats:"));
//! }
//! ```

use std::alloc::{handle_alloc_error, GlobalAlloc, Layout};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::os::raw::c_void;
use std::ptr::{self, NonNull};

pub mod ffi;

// ---------------------------------------------------------------------------
// The global allocator
// ---------------------------------------------------------------------------

/// The mimalloc global allocator: `#[global_allocator] static A: MiMalloc = MiMalloc;`.
///
/// Allocation with any alignment (`mi_malloc_aligned`), zeroed allocation
/// (`mi_zalloc_aligned`), re-allocation in place when the block has room
/// (`mi_realloc_aligned`); blocks may be freed by any thread.
#[derive(Debug, Default, Clone, Copy)]
pub struct MiMalloc;

unsafe impl GlobalAlloc for MiMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ffi::mi_malloc_aligned(layout.size(), layout.align()) as *mut u8
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ffi::mi_zalloc_aligned(layout.size(), layout.align()) as *mut u8
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        ffi::mi_free(ptr as *mut c_void)
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ffi::mi_realloc_aligned(ptr as *mut c_void, new_size, layout.align()) as *mut u8
    }
}

// ---------------------------------------------------------------------------
// The C API
// ---------------------------------------------------------------------------

/// The bytes available in the block at `ptr` (at least the size asked for);
/// 0 for a null pointer.
///
/// # Safety
/// `ptr` must be null or a live block of mimalloc.
pub unsafe fn usable_size(ptr: *const u8) -> usize {
    ffi::mi_usable_size(ptr as *const c_void)
}

/// The size mimalloc would really allocate for a request of `size` bytes.
pub fn good_size(size: usize) -> usize {
    unsafe { ffi::mi_good_size(size) }
}

/// Whether `ptr` points into memory that mimalloc manages (a constant-time
/// check that does not read the pointer).
pub fn is_in_heap_region(ptr: *const u8) -> bool {
    unsafe { ffi::mi_is_in_heap_region(ptr as *const c_void) }
}

/// Free what can be freed now: the calling thread's empty pages, and with
/// `force`, every delayed purge (memory goes back to the OS at once).
pub fn collect(force: bool) {
    unsafe { ffi::mi_collect(force) }
}

/// The version of the C library (`MI_MALLOC_VERSION`): 167 for 1.6.7.
pub fn version() -> i32 {
    unsafe { ffi::mi_version() }
}

/// The runtime options (`mi_option_t`), in the order of the C enum.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opt {
    ShowErrors = 0,
    ShowStats,
    Verbose,
    EagerCommit,
    EagerRegionCommit,
    ResetDecommits,
    LargeOsPages,
    ReserveHugeOsPages,
    SegmentCache,
    PageReset,
    AbandonedPageReset,
    SegmentReset,
    EagerCommitDelay,
    ResetDelay,
    UseNumaNodes,
    OsTag,
    MaxErrors,
}

/// The current value of an option (read from `MIMALLOC_<NAME>` the first time).
pub fn option_get(option: Opt) -> i64 {
    unsafe { ffi::mi_option_get(option as ffi::mi_option_t) as i64 }
}

/// Set an option (`mi_option_set`).
pub fn option_set(option: Opt, value: i64) {
    unsafe { ffi::mi_option_set(option as ffi::mi_option_t, value as std::os::raw::c_long) }
}

// ---------------------------------------------------------------------------
// Heaps
// ---------------------------------------------------------------------------

/// A first-class heap (`mi_heap_new`), deleted when dropped (`mi_heap_delete`):
/// blocks still allocated in it stay valid and move to the thread's default
/// heap.
///
/// A heap belongs to the thread that created it: only that thread allocates
/// from it (so `Heap` is neither `Send` nor `Sync`), while any thread may free
/// its blocks.
#[derive(Debug)]
pub struct Heap {
    raw: NonNull<ffi::mi_heap_t>,
    _owner_thread: PhantomData<*mut ()>,
}

impl Heap {
    /// A new heap. Panics if mimalloc cannot allocate one (out of memory);
    /// see [`Heap::try_new`].
    pub fn new() -> Heap {
        Heap::try_new().expect("mi_heap_new failed (out of memory)")
    }

    /// A new heap, or `None` if out of memory.
    pub fn try_new() -> Option<Heap> {
        let raw = unsafe { ffi::mi_heap_new() };
        NonNull::new(raw).map(|raw| Heap { raw, _owner_thread: PhantomData })
    }

    /// The `mi_heap_t*` for calls to the C API.
    pub fn as_raw(&self) -> *mut ffi::mi_heap_t {
        self.raw.as_ptr()
    }

    /// Allocate a block for `layout` in this heap; null if out of memory.
    /// Free it with [`free`] (from any thread).
    pub fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe { ffi::mi_heap_malloc_aligned(self.as_raw(), layout.size(), layout.align()) as *mut u8 }
    }

    /// Allocate a zeroed block for `layout` in this heap; null if out of memory.
    pub fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        unsafe { ffi::mi_heap_zalloc_aligned(self.as_raw(), layout.size(), layout.align()) as *mut u8 }
    }

    /// Resize a block to `new_size` bytes (keeping `layout`'s alignment),
    /// allocating in this heap if it moves; null if out of memory, and then
    /// the old block is left as it was.
    ///
    /// # Safety
    /// `ptr` must be a live block of mimalloc allocated with `layout`'s alignment.
    pub unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ffi::mi_heap_realloc_aligned(self.as_raw(), ptr as *mut c_void, new_size, layout.align()) as *mut u8
    }

    /// Move `value` into a block of this heap.
    pub fn boxed<T>(&self, value: T) -> HeapBox<T> {
        let layout = Layout::new::<T>();
        let ptr = if layout.size() == 0 {
            NonNull::<T>::dangling()
        } else {
            let p = self.alloc(layout) as *mut T;
            match NonNull::new(p) {
                Some(p) => p,
                None => handle_alloc_error(layout),
            }
        };
        unsafe { ptr::write(ptr.as_ptr(), value) };
        HeapBox { ptr, _owns: PhantomData }
    }

    /// Whether `ptr` points into a block of this heap.
    pub fn contains(&self, ptr: *const u8) -> bool {
        unsafe { ffi::mi_heap_contains_block(self.as_raw(), ptr as *const c_void) }
    }

    /// Whether `ptr` points into memory owned by this heap (allocated or not).
    pub fn check_owned(&self, ptr: *const u8) -> bool {
        unsafe { ffi::mi_heap_check_owned(self.as_raw(), ptr as *const c_void) }
    }

    /// Free the empty pages of this heap (with `force`, purge them at once).
    pub fn collect(&self, force: bool) {
        unsafe { ffi::mi_heap_collect(self.as_raw(), force) }
    }

    /// The number of live blocks in this heap and their total size in bytes
    /// (the sizes of the blocks, which may exceed what was asked for).
    pub fn live_blocks(&self) -> (usize, usize) {
        unsafe extern "C" fn visit(
            _heap: *const ffi::mi_heap_t,
            _area: *const ffi::mi_heap_area_t,
            block: *mut c_void,
            block_size: usize,
            arg: *mut c_void,
        ) -> bool {
            if !block.is_null() {
                let acc = &mut *(arg as *mut (usize, usize));
                acc.0 += 1;
                acc.1 += block_size;
            }
            true
        }
        let mut acc: (usize, usize) = (0, 0);
        unsafe {
            ffi::mi_heap_visit_blocks(self.as_raw(), true, Some(visit), &mut acc as *mut (usize, usize) as *mut c_void);
        }
        acc
    }

    /// Free every block of this heap at once and the heap itself
    /// (`mi_heap_destroy`), without running any destructor.
    ///
    /// # Safety
    /// No block of the heap may be used (or freed) afterwards: every pointer
    /// into it, and every [`HeapBox`] made by it, dangles.
    pub unsafe fn destroy(self) {
        let raw = self.as_raw();
        std::mem::forget(self);
        ffi::mi_heap_destroy(raw);
    }
}

impl Default for Heap {
    fn default() -> Heap {
        Heap::new()
    }
}

impl Drop for Heap {
    fn drop(&mut self) {
        unsafe { ffi::mi_heap_delete(self.as_raw()) }
    }
}

/// Free a block of mimalloc (of any heap, from any thread).
///
/// # Safety
/// `ptr` must be null or a live block of mimalloc, not used afterwards.
pub unsafe fn free(ptr: *mut u8) {
    ffi::mi_free(ptr as *mut c_void)
}

/// A value in a block of a [`Heap`], freed (after dropping the value) when the
/// box is dropped, by whichever thread drops it. The block outlives its heap:
/// a deleted heap's blocks move to the thread's default heap.
pub struct HeapBox<T> {
    ptr: NonNull<T>,
    _owns: PhantomData<T>,
}

unsafe impl<T: Send> Send for HeapBox<T> {}
unsafe impl<T: Sync> Sync for HeapBox<T> {}

impl<T> HeapBox<T> {
    /// The address of the value.
    pub fn as_ptr(&self) -> *const T {
        self.ptr.as_ptr()
    }
}

impl<T> Deref for HeapBox<T> {
    type Target = T;
    fn deref(&self) -> &T {
        unsafe { self.ptr.as_ref() }
    }
}

impl<T> DerefMut for HeapBox<T> {
    fn deref_mut(&mut self) -> &mut T {
        unsafe { self.ptr.as_mut() }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for HeapBox<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl<T> Drop for HeapBox<T> {
    fn drop(&mut self) {
        unsafe {
            ptr::drop_in_place(self.ptr.as_ptr());
            if std::mem::size_of::<T>() != 0 {
                ffi::mi_free(self.ptr.as_ptr() as *mut c_void);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------

/// The statistics of the process: the table `MIMALLOC_SHOW_STATS=1` prints at
/// exit, and the figures of `mi_process_info`.
pub mod stats {
    use super::ffi;
    use std::os::raw::{c_char, c_void};

    unsafe extern "C" fn append(msg: *const c_char, arg: *mut c_void) {
        if msg.is_null() {
            return;
        }
        let text = &mut *(arg as *mut Vec<u8>);
        text.extend_from_slice(std::ffi::CStr::from_ptr(msg).to_bytes());
    }

    /// The statistics table of the process (`mi_stats_print_out`).
    pub fn to_string() -> String {
        let mut text: Vec<u8> = Vec::with_capacity(4096);
        unsafe { ffi::mi_stats_print_out(Some(append), &mut text as *mut Vec<u8> as *mut c_void) };
        String::from_utf8_lossy(&text).into_owned()
    }

    /// The statistics table of the calling thread only (`mi_thread_stats_print_out`).
    pub fn thread_to_string() -> String {
        let mut text: Vec<u8> = Vec::with_capacity(4096);
        unsafe { ffi::mi_thread_stats_print_out(Some(append), &mut text as *mut Vec<u8> as *mut c_void) };
        String::from_utf8_lossy(&text).into_owned()
    }

    /// Print the statistics table where mimalloc prints its messages (stderr,
    /// unless an output function was registered).
    pub fn print() {
        unsafe { ffi::mi_stats_print_out(None, std::ptr::null_mut()) }
    }

    /// Start counting again from zero (`mi_stats_reset`).
    pub fn reset() {
        unsafe { ffi::mi_stats_reset() }
    }

    /// Merge the calling thread's counters into the process's (`mi_stats_merge`).
    pub fn merge() {
        unsafe { ffi::mi_stats_merge() }
    }

    /// The process as mimalloc sees it (`mi_process_info`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct ProcessInfo {
        pub elapsed_msecs: usize,
        pub user_msecs: usize,
        pub system_msecs: usize,
        pub current_rss: usize,
        pub peak_rss: usize,
        pub current_commit: usize,
        pub peak_commit: usize,
        pub page_faults: usize,
    }

    /// Elapsed and CPU time, resident and committed memory, page faults.
    pub fn process_info() -> ProcessInfo {
        let mut i = ProcessInfo::default();
        unsafe {
            ffi::mi_process_info(
                &mut i.elapsed_msecs,
                &mut i.user_msecs,
                &mut i.system_msecs,
                &mut i.current_rss,
                &mut i.peak_rss,
                &mut i.current_commit,
                &mut i.peak_commit,
                &mut i.page_faults,
            )
        };
        i
    }
}

// The examples of README.md run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
