// The graphile-worker side of `standmeet-lab bench --peer graphile`. `standmeet-lab bench`
// writes this file next to its own npm install of graphile-worker and runs it:
//
//   node graphile_driver.mjs migrate          installs graphile-worker's schema
//   node graphile_driver.mjs add N            queues N no-op jobs (batches of 10,000)
//   node graphile_driver.mjs work             one worker process: prints "ready",
//                                             starts on a "go" line, prints the count
//                                             of finished jobs every 1,000, stops at EOF
//   node graphile_driver.mjs latency N        N jobs one after another: prints, as
//                                             JSON, the milliseconds from each add's
//                                             commit to its job:complete event
//                                             ("complete") and to the notification
//                                             that its completion was written
//                                             ("written")
//
// DATABASE_URL says where. Every worker runs graphile-worker's fastest setting for
// short jobs: concurrency 24, a local queue, batched completion, no per-job log line.
import { createInterface } from "node:readline";
import { Logger, makeWorkerUtils, run, runMigrations } from "graphile-worker";
import pg from "pg";

const connectionString = process.env.DATABASE_URL;
const [mode, countArg] = process.argv.slice(2);
const count = Number(countArg ?? 0);

// graphile-worker logs every completed job at info level; its fastest setting logs
// nothing (the StandMeet side logs warnings only).
const quiet = new Logger(() => (level, message) => {
  if (level === "error") console.error(message);
});

const options = {
  connectionString,
  concurrency: 24,
  noHandleSignals: true,
  pollInterval: 1000,
  logger: quiet,
  taskList: { noop: async () => {} },
  preset: {
    worker: {
      localQueue: { size: 500 },
      completeJobBatchDelay: 0,
      failJobBatchDelay: 0,
    },
  },
};

const lines = createInterface({ input: process.stdin });

if (mode === "migrate") {
  await runMigrations({ connectionString, logger: quiet });
} else if (mode === "add") {
  const utils = await makeWorkerUtils({ connectionString, logger: quiet });
  for (let left = count; left > 0; left -= 10_000) {
    const batch = Math.min(left, 10_000);
    await utils.addJobs(
      Array.from({ length: batch }, (_, n) => ({ identifier: "noop", payload: { n } })),
    );
  }
  await utils.release();
} else if (mode === "work") {
  let done = 0;
  const go = new Promise((resolve) => lines.once("line", resolve));
  console.log("ready");
  await go;
  const runner = await run(options);
  runner.events.on("job:complete", () => {
    done += 1;
    if (done % 1000 === 0) console.log(String(done));
  });
  // The benchmark closes our stdin when it has seen every job finish.
  await new Promise((resolve) => lines.once("close", resolve));
  await runner.stop();
  console.log(String(done));
} else if (mode === "latency") {
  // job:complete fires when the worker has run the job and handed it to the batched
  // completion, before the completion is written. For the like-for-like measure (a
  // caller told once the outcome has committed, as StandMeet's waiters are), a
  // trigger notifies when graphile-worker deletes the row of a job that succeeded.
  // It exists only during this measure, so the drains do not pay for it.
  const listener = new pg.Client({ connectionString });
  await listener.connect();
  await listener.query(`
    CREATE OR REPLACE FUNCTION public.bench_completion_written() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('bench_completion_written', OLD.id::text);
      RETURN OLD;
    END $$;
    DROP TRIGGER IF EXISTS bench_completion_written ON graphile_worker._private_jobs;
    CREATE TRIGGER bench_completion_written AFTER DELETE ON graphile_worker._private_jobs
      FOR EACH ROW EXECUTE FUNCTION public.bench_completion_written();
    LISTEN bench_completion_written;`);
  const runner = await run(options);
  const utils = await makeWorkerUtils({ connectionString, logger: quiet });
  // Each job's two moments, by id; an event may come before the add's answer is read.
  const moments = new Map();
  const moment = (id) => {
    let entry = moments.get(id);
    if (!entry) {
      entry = {};
      entry.both = new Promise((resolve) => (entry.check = () => {
        if (entry.complete !== undefined && entry.written !== undefined) resolve();
      }));
      moments.set(id, entry);
    }
    return entry;
  };
  runner.events.on("job:complete", ({ job }) => {
    const entry = moment(String(job.id));
    entry.complete = performance.now();
    entry.check();
  });
  listener.on("notification", ({ payload }) => {
    const entry = moment(payload);
    entry.written = performance.now();
    entry.check();
  });
  const complete = [];
  const written = [];
  for (let n = 0; n < count + 20; n++) {
    // The add's promise settles once its transaction has committed.
    const job = await utils.addJob("noop", { n });
    const committed = performance.now();
    const entry = moment(String(job.id));
    await entry.both;
    moments.delete(String(job.id));
    // The first 20 warm up, as on the StandMeet side. A moment read before the add's
    // answer counts as no time at all.
    if (n >= 20) {
      complete.push(Math.max(0, entry.complete - committed));
      written.push(Math.max(0, entry.written - committed));
    }
  }
  await utils.release();
  await runner.stop();
  await listener.query(`
    DROP TRIGGER bench_completion_written ON graphile_worker._private_jobs;
    DROP FUNCTION public.bench_completion_written();`);
  await listener.end();
  console.log(JSON.stringify({ complete, written }));
} else {
  console.error(`unknown mode ${mode}: migrate, add N, work or latency N`);
  process.exit(2);
}
lines.close();
