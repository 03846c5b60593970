//! `O_TMPFILE` (Linux): the bytes go to a file with no name in the target's directory,
//! which gets a name only once it is whole, so a `kill -9` while writing leaves nothing.

use super::*;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};

/// [`replace`](super::replace) through an unnamed file. `None` where the kernel or the
/// filesystem has no `O_TMPFILE` (or the file cannot be linked): the caller then
/// writes a named temporary file instead.
pub(super) fn replace(
    parent: &Path,
    target: &Path,
    builder: &tempfile::Builder,
    content: Content,
    durable: bool,
    permissions: &Option<fs::Permissions>,
) -> Option<io::Result<()>> {
    let mode = permissions.as_ref().map_or(0o666, |p| p.mode() & 0o777);
    let file = match OpenOptions::new()
        .write(true)
        .mode(mode)
        .custom_flags(libc::O_TMPFILE)
        .open(parent)
    {
        Ok(file) => file,
        // No O_TMPFILE here: EOPNOTSUPP from the filesystem, EISDIR or EINVAL from a
        // kernel that predates it.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
            ) =>
        {
            return None
        }
        Err(e) => return Some(Err(e)),
    };
    let written = (|| {
        if let Some(permissions) = permissions {
            file.set_permissions(permissions.clone())?;
        }
        buffered(&file, content)?;
        if durable {
            file.sync_all()?;
        }
        Ok(())
    })();
    if let Err(e) = written {
        // Closing the file frees it: it never had a name.
        return Some(Err(e));
    }
    if permissions.is_none() {
        // Nothing was at the name: the file is linked straight there, and never has
        // any other name. `linkat` fails on a name taken since, and never follows it.
        match crate::sys::link_unnamed(&file, target) {
            Ok(()) => return Some(synced(parent, durable)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) if e.kind() == io::ErrorKind::Unsupported => return None,
            Err(e) => return Some(Err(e)),
        }
    }
    // A file is there: the whole one gets a random name beside it (another one if
    // that is taken, by anything), which is renamed over the target at once. Only a
    // kill between these two calls leaves it, for the next writer to remove.
    let linked = match builder.make_in(parent, |path| crate::sys::link_unnamed(&file, path)) {
        Ok(linked) => linked,
        Err(e) if e.kind() == io::ErrorKind::Unsupported => return None,
        Err(e) => return Some(Err(e)),
    };
    // On failure the name is removed (the `PersistError` drops it).
    let renamed = linked.persist(target).map_err(|e| e.error);
    Some(renamed.and_then(|()| synced(parent, durable)))
}

/// With `durable`, the directory (the new name in it) reaches the disk.
fn synced(parent: &Path, durable: bool) -> io::Result<()> {
    if durable {
        File::open(parent).and_then(|dir| dir.sync_all())?;
    }
    Ok(())
}
