// The graphile-worker side of `standmeet bench --peer graphile`. `standmeet bench`
// writes this file next to its own npm install of graphile-worker and runs it:
//
//   node graphile_driver.mjs migrate          installs graphile-worker's schema
//   node graphile_driver.mjs add N            queues N no-op jobs (batches of 10,000)
//   node graphile_driver.mjs work             one worker process: prints "ready",
//                                             starts on a "go" line, prints the count
//                                             of finished jobs every 1,000, stops at EOF
//   node graphile_driver.mjs latency N        N jobs one after another: prints the
//                                             milliseconds from each add's commit to
//                                             its job:complete event, as JSON
//
// DATABASE_URL says where. Every worker runs graphile-worker's fastest setting for
// short jobs: concurrency 24, a local queue, batched completion, no per-job log line.
import { createInterface } from "node:readline";
import { Logger, makeWorkerUtils, run, runMigrations } from "graphile-worker";

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
  const runner = await run(options);
  const utils = await makeWorkerUtils({ connectionString, logger: quiet });
  const waiting = new Map();
  const early = new Set(); // finished before its add's answer was read
  runner.events.on("job:complete", ({ job }) => {
    const finished = waiting.get(String(job.id));
    if (finished) finished();
    else early.add(String(job.id));
  });
  const samples = [];
  for (let n = 0; n < count + 20; n++) {
    // The add's promise settles once its transaction has committed; the event fires
    // when the worker has run the job and handed it to the batched completion.
    let finished;
    const complete = new Promise((resolve) => (finished = resolve));
    const job = await utils.addJob("noop", { n });
    const committed = performance.now();
    waiting.set(String(job.id), finished);
    if (early.delete(String(job.id))) finished();
    await complete;
    waiting.delete(String(job.id));
    // The first 20 warm up, as on the StandMeet side.
    if (n >= 20) samples.push(performance.now() - committed);
  }
  await utils.release();
  await runner.stop();
  console.log(JSON.stringify(samples));
} else {
  console.error(`unknown mode ${mode}: migrate, add N, work or latency N`);
  process.exit(2);
}
lines.close();
