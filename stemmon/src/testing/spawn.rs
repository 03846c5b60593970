//! Threads a test starts count for it: this program's own `pthread_create` (an
//! executable's definition wins over libc's when it is linked) starts the thread
//! through libc's, and first attaches it to the test the starting thread counts for.
//! A thread started outside any test is libc's call unchanged. std, rayon and tokio
//! all start their threads through it.

use crate::heap::attach;
use crate::heap::tally::Tally;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

type Start = extern "C" fn(*mut c_void) -> *mut c_void;
type Create = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    Start,
    *mut c_void,
) -> libc::c_int;

/// libc's `pthread_create`, looked up once.
static REAL: AtomicUsize = AtomicUsize::new(0);

fn real() -> Option<Create> {
    let mut address = REAL.load(Ordering::Acquire);
    if address == 0 {
        // SAFETY: a NUL-terminated name; RTLD_NEXT finds the definition after this
        // program's, libc's.
        address = unsafe { libc::dlsym(libc::RTLD_NEXT, c"pthread_create".as_ptr()) } as usize;
        if address == 0 {
            return None;
        }
        REAL.store(address, Ordering::Release);
    }
    // SAFETY: the address is libc's `pthread_create`, whose signature is `Create`.
    Some(unsafe { std::mem::transmute::<usize, Create>(address) })
}

/// What the new thread needs: the routine, its argument, the test it counts for.
struct Attached {
    start: Start,
    arg: *mut c_void,
    tally: Arc<Tally>,
}

extern "C" fn attached_start(attached: *mut c_void) -> *mut c_void {
    // SAFETY: `attached` is the box `pthread_create` below leaked for this thread,
    // taken back once, here.
    let attached = unsafe { Box::from_raw(attached.cast::<Attached>()) };
    // Attached first: freeing the box is the test's too.
    attach::attach(Arc::clone(&attached.tally));
    let (start, arg) = (attached.start, attached.arg);
    drop(attached);
    start(arg)
}

/// `pthread_create(3)`, which also attaches the new thread to the starting thread's
/// test.
///
/// # Safety
///
/// The contract of `pthread_create(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: Start,
    arg: *mut c_void,
) -> libc::c_int {
    let Some(real) = real() else {
        return libc::EAGAIN;
    };
    let Some(tally) = attach::current() else {
        // SAFETY: the caller's arguments, unchanged, to libc's function.
        return unsafe { real(thread, attr, start, arg) };
    };
    let attached = Box::into_raw(Box::new(Attached { start, arg, tally }));
    // SAFETY: the caller's arguments, but for the routine, which runs theirs on `arg`.
    let made = unsafe { real(thread, attr, attached_start, attached.cast()) };
    if made != 0 {
        // SAFETY: no thread was started: the box is still ours.
        drop(unsafe { Box::from_raw(attached) });
    }
    made
}

/// Keeps this program's `pthread_create` linked in (a caller of the testing API
/// names it).
pub(crate) fn linked() -> usize {
    pthread_create as *const () as usize
}
