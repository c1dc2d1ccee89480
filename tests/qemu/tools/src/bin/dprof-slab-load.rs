//! Generates slab traffic as fast as it can, for the collector throughput benchmark: each
//! iteration opens and closes /dev/null, which allocates and frees a `filp` and a
//! `names_cache` buffer (4 slab records). Prints iterations per second.
//!
//! Usage: dprof-slab-load SECONDS THREADS

use std::time::{Duration, Instant};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let seconds: f64 = args.get(1).map_or(Ok(5.0), |s| s.parse())?;
    let threads: usize = args.get(2).map_or(Ok(1), |s| s.parse())?;
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            std::thread::spawn(move || -> std::io::Result<u64> {
                let mut iterations = 0u64;
                while Instant::now() < deadline {
                    for _ in 0..100 {
                        drop(std::fs::File::open("/dev/null")?);
                    }
                    iterations += 100;
                }
                Ok(iterations)
            })
        })
        .collect();
    let mut total = 0u64;
    for worker in workers {
        total += worker
            .join()
            .map_err(|_| anyhow::anyhow!("a load thread panicked"))??;
    }
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "dprof-slab-load: {threads} threads, {total} open/close in {elapsed:.2} s = {:.0}/s",
        total as f64 / elapsed
    );
    Ok(())
}
