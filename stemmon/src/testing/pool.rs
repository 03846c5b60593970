//! The test's own rayon pool: its threads are started by the test and count for it.
//! (The global pool's threads are started by whichever test first uses it.)

use crate::heap::attach;
use crate::heap::tally::Tally;
use std::sync::{Arc, Mutex};

/// Runs `body` on a pool of the test's own and joins the pool's threads before it
/// returns, so that what they freed is counted.
pub(crate) fn install<R: Send>(counted: &Arc<Tally>, body: impl FnOnce() -> R + Send) -> R {
    let threads = Arc::new(Mutex::new(Vec::new()));
    let spawned = Arc::clone(&threads);
    let for_workers = Arc::clone(counted);
    let pool = rayon::ThreadPoolBuilder::new()
        // Where `pthread_create` is not wrapped, the worker joins the test itself.
        .start_handler(move |_| {
            attach::attach(Arc::clone(&for_workers));
        })
        .spawn_handler(move |worker| {
            let handle = std::thread::Builder::new().spawn(move || worker.run())?;
            spawned
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(handle);
            Ok(())
        })
        .build()
        .unwrap_or_else(|e| panic!("the test's rayon pool could not start: {e}"));
    let out = pool.install(body);
    drop(pool);
    let handles = std::mem::take(&mut *threads.lock().unwrap_or_else(|e| e.into_inner()));
    for handle in handles {
        let _ = handle.join();
    }
    out
}
