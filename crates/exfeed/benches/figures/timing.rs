//! Clocks and medians.

/// The median (upper middle) of `v`.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn clock_secs(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// CPU time of the calling thread.
pub fn thread_cpu_secs() -> f64 {
    clock_secs(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time of the whole process (all threads).
pub fn process_cpu_secs() -> f64 {
    clock_secs(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn rusage_secs(who: libc::c_int) -> f64 {
    // SAFETY: getrusage fills one rusage struct through a valid pointer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return f64::NAN;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// User and system CPU time of the waited-for child processes (for `cat`).
pub fn children_cpu_secs() -> f64 {
    rusage_secs(libc::RUSAGE_CHILDREN)
}

/// User and system CPU time of the whole process.
pub fn self_cpu_secs() -> f64 {
    rusage_secs(libc::RUSAGE_SELF)
}

/// The 1-minute load average (other jobs on the machine), as /proc/loadavg gives it.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}
