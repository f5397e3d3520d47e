//! CPU time spent around a measure, read from `/proc` (user + system): this process,
//! the PostgreSQL cluster's processes, and a peer's child processes.
//!
//! On two cores every CPU-second the engine spends is one PostgreSQL cannot, so the
//! CPU a drain costs is a figure beside its speed, and one a noisy machine moves less.
//!
//! The cluster's share is the postmaster's own time, its live children's, and the time
//! of the children it has reaped (`cutime`/`cstime`): a backend that exits during the
//! measure is counted until its end, one that starts is counted from its start.

use std::time::Duration;

use anyhow::Context;

/// Clock ticks per second of `/proc/*/stat` (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

/// Where to read the CPU time of the cluster from.
#[derive(Clone, Copy)]
pub(super) struct Cluster {
    postmaster: u32,
}

impl Cluster {
    pub(super) fn new(cluster: &standmeet::db::PrivateCluster) -> anyhow::Result<Cluster> {
        Ok(Cluster {
            postmaster: cluster.postmaster_pid()?,
        })
    }

    /// CPU time of the postmaster and all its children so far.
    fn cpu(&self) -> anyhow::Result<Duration> {
        let postmaster = Stat::of(self.postmaster)
            .with_context(|| format!("cannot read the postmaster's /proc/{}", self.postmaster))?;
        let mut ticks = postmaster.own_ticks() + postmaster.reaped_children_ticks();
        for child in children_of(self.postmaster)? {
            // A backend that exits between the listing and the read is counted in the
            // postmaster's reaped time from then on.
            if let Ok(stat) = Stat::of(child) {
                ticks += stat.own_ticks();
            }
        }
        Ok(ticks_to_duration(ticks))
    }
}

/// The CPU time of this process, the cluster and some peer processes at one moment.
pub(super) struct Reading {
    this_process: Duration,
    cluster: Duration,
    peers: Duration,
}

/// What a measure cost: CPU time of this process (where StandMeet's engine runs), of
/// the cluster, and of the peer's processes.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Spent {
    pub this_process: Duration,
    pub cluster: Duration,
    pub peers: Duration,
}

impl Reading {
    /// Reads now; `peers` are processes of a peer system to count as well.
    pub(super) fn now(cluster: &Cluster, peers: &[u32]) -> anyhow::Result<Reading> {
        let mut peer_ticks = 0;
        for &pid in peers {
            peer_ticks += Stat::of(pid)
                .with_context(|| format!("cannot read /proc/{pid}"))?
                .own_ticks();
        }
        Ok(Reading {
            this_process: ticks_to_duration(Stat::of(std::process::id())?.own_ticks()),
            cluster: cluster.cpu()?,
            peers: ticks_to_duration(peer_ticks),
        })
    }

    /// What was spent since `self`.
    pub(super) fn spent_until(&self, later: &Reading) -> Spent {
        Spent {
            this_process: later.this_process.saturating_sub(self.this_process),
            cluster: later.cluster.saturating_sub(self.cluster),
            peers: later.peers.saturating_sub(self.peers),
        }
    }
}

impl Spent {
    /// Milliseconds of CPU per 1,000 jobs of `jobs` for `part`.
    pub(super) fn per_thousand(part: Duration, jobs: usize) -> f64 {
        part.as_secs_f64() * 1_000.0 / jobs as f64 * 1_000.0
    }
}

/// The fields of `/proc/<pid>/stat` read here.
struct Stat {
    utime: u64,
    stime: u64,
    cutime: u64,
    cstime: u64,
}

impl Stat {
    fn of(pid: u32) -> anyhow::Result<Stat> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        let fields = after_command(&text)?;
        // After the command: state (3), ppid (4), … utime (14), stime (15),
        // cutime (16), cstime (17), counted from 1 in proc(5); index 0 here is field 3.
        let field = |n: usize| -> anyhow::Result<u64> {
            let value = fields
                .get(n - 3)
                .with_context(|| format!("/proc/{pid}/stat has no field {n}"))?;
            value
                .parse::<i64>()
                .map(|v| v.max(0) as u64)
                .with_context(|| format!("field {n} of /proc/{pid}/stat is not a number"))
        };
        Ok(Stat {
            utime: field(14)?,
            stime: field(15)?,
            cutime: field(16)?,
            cstime: field(17)?,
        })
    }

    fn own_ticks(&self) -> u64 {
        self.utime + self.stime
    }

    fn reaped_children_ticks(&self) -> u64 {
        self.cutime + self.cstime
    }
}

/// The fields after `pid (command)`: the command may hold spaces and parentheses, so
/// the split is at the last `)`.
fn after_command(stat: &str) -> anyhow::Result<Vec<&str>> {
    let end = stat
        .rfind(')')
        .context("a /proc stat line without its command")?;
    Ok(stat[end + 1..].split_whitespace().collect())
}

/// The processes whose parent is `parent`.
fn children_of(parent: u32) -> anyhow::Result<Vec<u32>> {
    let mut children = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let Some(pid) = entry?
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if after_command(&text)
            .ok()
            .and_then(|fields| fields.get(1).and_then(|p| p.parse::<u32>().ok()))
            == Some(parent)
        {
            children.push(pid);
        }
    }
    Ok(children)
}

fn ticks_to_duration(ticks: u64) -> Duration {
    Duration::from_secs_f64(ticks as f64 / TICKS_PER_SECOND)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_with_spaces_and_parentheses_does_not_shift_the_fields() {
        let line = "42 (postgres: a (b) c) S 7 42 42 0 -1 4194560 1 0 0 0 11 22 33 44 20 0";
        let fields = after_command(line).unwrap();
        assert_eq!(fields[0], "S");
        assert_eq!(fields[1], "7");
        assert_eq!(fields[14 - 3], "11");
        assert_eq!(fields[17 - 3], "44");
    }

    #[test]
    fn this_process_is_charged_for_the_cpu_it_spends() {
        let before = Stat::of(std::process::id()).unwrap().own_ticks();
        let started = std::time::Instant::now();
        let mut after = before;
        let mut x = 0u64;
        // Busy until a tick is counted (10 ms of CPU), or 10 s have passed.
        while after == before && started.elapsed() < Duration::from_secs(10) {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            after = Stat::of(std::process::id()).unwrap().own_ticks();
        }
        assert!(
            after > before,
            "no CPU time counted for 10 s of a busy loop"
        );
    }
}
