//! The opt-in counting allocator (the book's `heap.md`): [`Alloc`] wraps the program's allocator
//! and counts every allocation and free into counters of the thread that makes it, so
//! the engine can say which stage held the memory.
//!
//! The counting ([`slots`]) is the allocator's hot path: one thread-local read (a
//! `const`-initialised `Cell` without destructor, so it never allocates nor registers
//! anything), then relaxed loads and stores of counters on the thread's own cache
//! line. No lock, no atomic read-modify-write, no header on the allocation.

pub(crate) mod attach;
pub(crate) mod slots;
pub(crate) mod tally;

use std::alloc::{GlobalAlloc, Layout, System};

/// A global allocator that counts, per thread, what every stage allocates and frees
/// (the book's `heap.md`). Install it in the program (not in a library):
///
/// ```
/// #[global_allocator]
/// static ALLOC: stemmon::Alloc = stemmon::Alloc::system();
/// # fn main() {}
/// ```
///
/// or wrap another allocator: `stemmon::Alloc::new(mimalloc::MiMalloc)`. Each stage of
/// the report then gets `heap_allocations`, `heap_allocated_bytes`,
/// `heap_freed_bytes`, `heap_retained_bytes` and `peak_heap_bytes`, and the report a
/// `heap` section; without it those are `null` and `heap.missing` says why.
///
/// A `realloc` counts as a free of the old size and an allocation of the new one (one
/// more allocation), so `allocated − freed` is always the bytes held.
///
/// With the crate's `enabled` feature off it is the inner allocator and nothing else.
#[derive(Debug, Default, Clone, Copy)]
pub struct Alloc<A: GlobalAlloc = System> {
    inner: A,
}

impl Alloc<System> {
    /// Counts the system allocator.
    pub const fn system() -> Alloc<System> {
        Alloc { inner: System }
    }
}

impl<A: GlobalAlloc> Alloc<A> {
    /// Counts `inner`.
    pub const fn new(inner: A) -> Alloc<A> {
        Alloc { inner }
    }

    /// Notes the first use of this allocator: which one it is, for the report.
    #[cfg(feature = "enabled")]
    #[inline(always)]
    fn counted(size: usize) {
        slots::allocated(size, std::any::type_name::<A>);
    }
}

// SAFETY: every method forwards to the inner allocator with the caller's arguments,
// unchanged, and returns what it returned; the counting around it reads and writes
// only counters, never the memory, and never allocates.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Alloc<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract; it is passed on unchanged.
        let ptr = unsafe { self.inner.alloc(layout) };
        #[cfg(feature = "enabled")]
        if !ptr.is_null() {
            Self::counted(layout.size());
        }
        ptr
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc_zeroed`'s contract; passed on unchanged.
        let ptr = unsafe { self.inner.alloc_zeroed(layout) };
        #[cfg(feature = "enabled")]
        if !ptr.is_null() {
            Self::counted(layout.size());
        }
        ptr
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `dealloc`'s contract; passed on unchanged.
        unsafe { self.inner.dealloc(ptr, layout) };
        #[cfg(feature = "enabled")]
        slots::freed(layout.size());
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller upholds `realloc`'s contract; passed on unchanged.
        let new = unsafe { self.inner.realloc(ptr, layout, new_size) };
        #[cfg(feature = "enabled")]
        if !new.is_null() {
            // A free of the old block and an allocation of the new one.
            slots::freed(layout.size());
            Self::counted(new_size);
        }
        new
    }
}
