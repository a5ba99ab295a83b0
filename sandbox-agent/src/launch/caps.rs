//! The process's capability sets through capget/capset (the v3 ABI: two 32-bit words per
//! set): emptied for good before the agent starts, or the effective set raised back to
//! the permitted one for a single privileged step.

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const V3: u32 = 0x2008_0522;

fn set(data: &[CapData; 2]) -> std::io::Result<()> {
    let header = CapHeader {
        version: V3,
        pid: 0,
    };
    // SAFETY: header and data are valid for the v3 ABI (two data elements).
    if unsafe { libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Empties every set of this thread (effective, permitted, inheritable).
pub(super) fn clear_all() -> std::io::Result<()> {
    set(&[CapData::default(); 2])
}

/// Raises the effective set to the permitted one. A change of the filesystem uid away from
/// 0 clears the filesystem capabilities (CAP_DAC_OVERRIDE, CAP_FOWNER, ...) from the
/// effective set; a step that must act as another fsuid with them calls this after.
pub(super) fn raise_effective() -> std::io::Result<()> {
    let mut header = CapHeader {
        version: V3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: header and data are valid for the v3 ABI (two data elements), written by
    // the kernel.
    if unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            data.as_mut_ptr(),
        )
    } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    for d in &mut data {
        d.effective = d.permitted;
    }
    set(&data)
}
