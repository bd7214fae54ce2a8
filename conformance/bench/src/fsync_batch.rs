//! The disk alone, no HTTP: how many durable record writes per second a batched writer could
//! reach against the per-record baseline of `settle-throughput`, at the same concurrency
//! levels. It sizes an option for issue 15's settlement goal; it is not what the journal does.
//!
//! - per record (the baseline's durable write): K threads, each in turn writing a record to a
//!   temp file, fsyncing it, renaming it into place and fsyncing the directory;
//! - batched: one writer takes K records at a time, writes and renames all of them with no
//!   fsync, then makes them all durable with ONE `syncfs` of the filesystem (which also
//!   flushes every other file's dirty data on that filesystem: the catch).
//!
//! Records are 600-byte JSON bodies in a temp directory under `--dir` (default the system temp
//! dir), removed between runs (untimed). Rounds alternate the paths; the report is the median
//! rate per path and level and the ratio batched / per record. Run: `cargo run --release -p
//! cycles-bench --bin fsync-batch` (see docs/benchmarks.md).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    about = "Durable record writes per second: per-record fsyncs against one syncfs per batch"
)]
struct Args {
    /// Concurrency levels (records in flight: threads per record, or the batch size).
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    concurrency: Vec<usize>,
    /// Records per timed run.
    #[arg(long, default_value_t = 1024)]
    records: usize,
    /// Rounds per level (each times both paths once).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Parent of the record directory (must be on the disk being measured).
    #[arg(long)]
    dir: Option<PathBuf>,
}

const BODY: &[u8] = &[b'x'; 600];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn write_temp(dir: &Path, i: usize, sync: bool) -> std::io::Result<PathBuf> {
    let tmp = dir.join(format!("r{i}.json.tmp"));
    let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    f.write_all(BODY)?;
    if sync {
        f.sync_all()?;
    }
    let path = dir.join(format!("r{i}.json"));
    fs::rename(&tmp, &path)?;
    Ok(path)
}

/// `n` records, `k` threads each writing its share durably one at a time.
fn per_record(dir: &Path, k: usize, n: usize) -> std::io::Result<()> {
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..k)
            .map(|t| {
                s.spawn(move || -> std::io::Result<()> {
                    for j in 0..n / k {
                        write_temp(dir, t * n + j, true)?;
                        File::open(dir)?.sync_all()?;
                    }
                    Ok(())
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().expect("a writer thread panicked"))
    })
}

/// `n` records in batches of `k`, each batch made durable by one `syncfs`.
fn batched(dir: &Path, k: usize, n: usize) -> std::io::Result<()> {
    let fs_handle = File::open(dir)?;
    for b in 0..n / k {
        for j in 0..k {
            write_temp(dir, b * k + j, false)?;
        }
        rustix::fs::syncfs(&fs_handle)?;
    }
    Ok(())
}

fn empty(dir: &Path) -> std::io::Result<()> {
    for e in fs::read_dir(dir)? {
        fs::remove_file(e?.path())?;
    }
    Ok(())
}

fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let parent = args.dir.unwrap_or_else(std::env::temp_dir);
    let dir = parent.join(format!("cycles-fsync-batch-{}", std::process::id()));
    fs::create_dir_all(&dir)?;
    println!(
        "fsync-batch: {} rounds x {} records per path and level, in {}",
        args.rounds,
        args.records,
        dir.display()
    );
    println!("| in flight | per record (/s) | one syncfs per batch (/s) | ratio |");
    println!("|---:|---:|---:|---:|");
    for &k in &args.concurrency {
        let n = args.records / k * k;
        let (mut per, mut batch) = (Vec::new(), Vec::new());
        for _ in 0..args.rounds {
            let t0 = Instant::now();
            per_record(&dir, k, n)?;
            per.push(n as f64 / t0.elapsed().as_secs_f64());
            empty(&dir)?;
            let t0 = Instant::now();
            batched(&dir, k, n)?;
            batch.push(n as f64 / t0.elapsed().as_secs_f64());
            empty(&dir)?;
        }
        let (p, b) = (median(per), median(batch));
        println!("| {k} | {p:.0} | {b:.0} | {:.2}x |", b / p);
    }
    fs::remove_dir_all(&dir)
}
