//! The built-in sampled operator profiler.
use manypy_sys as sys;

use crate::call::value_result;
use crate::error::{owned, Error, Result};
use crate::handle::Handle;
use crate::version::check_library_version;

/// Aggregates sampled operator timings by model id and operator, in every
/// interpreter and the host. Stops when dropped. `Send + Sync`.
pub struct Profiler(Handle<sys::manypy_profiler>);

/// One (model, operator) aggregate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileEntry {
    /// The calls' model id ("" without a context).
    pub model_id: String,
    pub op_name: String,
    /// Sampled calls.
    pub count: u64,
    pub total_ns: i64,
    /// Over the latest 4096 samples.
    pub p50_ns: i64,
    pub p99_ns: i64,
}

impl Profiler {
    /// Starts profiling with sampling probability in (0, 1]. Uses one of the
    /// process's 16 callback registrations.
    pub fn start(sampling_probability: f64) -> Result<Profiler> {
        check_library_version()?;
        let mut out = std::ptr::null_mut();
        unsafe { Error::check(sys::manypy_profiler_start(sampling_probability, &mut out))? };
        Handle::returned(out, "profiler").map(Profiler)
    }

    /// The aggregates so far.
    pub fn snapshot(&self) -> Result<Vec<ProfileEntry>> {
        let (mut entries, mut count) = (std::ptr::null_mut(), 0usize);
        unsafe {
            Error::check(sys::manypy_profiler_snapshot(
                self.0.as_ptr(),
                &mut entries,
                &mut count,
            ))?;
            let out = (0..count)
                .map(|i| {
                    let e = &*sys::manypy_profile_entry_at(entries, i);
                    ProfileEntry {
                        model_id: owned(e.model_id),
                        op_name: owned(e.op_name),
                        count: e.count,
                        total_ns: e.total_ns,
                        p50_ns: e.p50_ns,
                        p99_ns: e.p99_ns,
                    }
                })
                .collect();
            sys::manypy_profile_entries_free(entries, count);
            Ok(out)
        }
    }

    /// The aggregates in the Prometheus text format.
    pub fn prometheus(&self) -> Result<String> {
        String::try_from(value_result(|out| unsafe {
            sys::manypy_profiler_prometheus(self.0.as_ptr(), out)
        })?)
    }

    /// The latest sampled events as Chrome trace-event JSON.
    pub fn chrome_trace(&self) -> Result<String> {
        String::try_from(value_result(|out| unsafe {
            sys::manypy_profiler_chrome_trace(self.0.as_ptr(), out)
        })?)
    }
}

impl std::fmt::Debug for Profiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler").finish_non_exhaustive()
    }
}
