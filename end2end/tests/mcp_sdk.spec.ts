import { expect, test } from "@playwright/test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { boardUrl, resetBoards, slowBoard } from "./fixtures/boards";
import { insertJob } from "./fixtures/db";
import { insertSource, resetListings } from "./fixtures/listings_page";
import { MCP_TOKEN, ports } from "./fixtures/ports";

// StandMeet's MCP endpoint as an agent built on the official TypeScript SDK sees it
// (docs/mcp.md): the SDK's own checks of titles, annotations and output schemas,
// progress while a tool waits, and a job's resource that says when the job is done.

/** An agent connected to /mcp with the token (it starts a session). */
async function connect(): Promise<Client> {
  const client = new Client({ name: "standmeet-e2e-agent", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${ports.app}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${MCP_TOKEN}` } },
  });
  await client.connect(transport);
  return client;
}

test("the tools have titles, annotations and output schemas", async () => {
  const client = await connect();
  try {
    const { tools } = await client.listTools();
    expect(tools).toHaveLength(29);
    for (const tool of tools) {
      expect(tool.title, tool.name).toBeTruthy();
      expect(typeof tool.annotations?.readOnlyHint, tool.name).toBe("boolean");
      expect(tool.outputSchema?.type, tool.name).toBe("object");
    }
    const tool = (name: string) => tools.find((t) => t.name === name)!;
    expect(tool("tasks.list").annotations?.readOnlyHint).toBe(true);
    expect(tool("webhooks.delete").annotations?.destructiveHint).toBe(true);
    expect(tool("jobs.fetch_new").annotations?.openWorldHint).toBe(true);
    expect(tool("corpus.create").annotations?.idempotentHint).toBe(false);
  } finally {
    await client.close();
  }
});

test("the reads answer as their output schemas say, which the SDK checks", async () => {
  const client = await connect();
  try {
    // The SDK keeps each listed tool's output schema and validates every answer of
    // that tool against it: a mismatch throws.
    await client.listTools();
    const reads: [string, object][] = [
      ["access_requests.list", {}],
      ["tasks.list", { limit: 2 }],
      ["queues.list", {}],
      ["schedules.list", {}],
      ["events.list", { limit: 5 }],
      ["webhooks.list", {}],
      ["bookings.list", {}],
      ["bookings.slots", { days: 2 }],
      ["corpus.search", { q: "rust" }],
    ];
    for (const [name, args] of reads) {
      const result = await client.callTool({ name, arguments: args as Record<string, unknown> });
      expect(result.isError, name).toBeFalsy();
      expect(result.structuredContent, name).toBeDefined();
    }
    // A refusal is a tool error in words, which the output schema allows, so the SDK
    // hands it over instead of throwing.
    const refused = await client.callTool({ name: "tasks.get", arguments: { job_id: 424242 } });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toEqual({ error: "There is no job 424242." });
    // tasks.list searches as the panel's box does and pages to the end, each job once.
    const batch = `sdk-${Date.now()}`;
    const inserted = [];
    for (let n = 0; n < 3; n++) {
      inserted.push(await insertJob("system.noop", { batch, n }, { scheduledInSeconds: 3600 }));
    }
    const seen: number[] = [];
    let after: number | null = null;
    do {
      const result = await client.callTool({
        name: "tasks.list",
        arguments: { q: JSON.stringify({ batch }), limit: 2, ...(after === null ? {} : { after }) },
      });
      const page = result.structuredContent as { tasks: { id: number }[]; next_after: number | null };
      seen.push(...page.tasks.map((task) => task.id));
      after = page.next_after;
    } while (after !== null);
    expect(seen).toEqual([...inserted].reverse());
  } finally {
    await client.close();
  }
});

test("jobs.fetch_new on a slow board sends progress, and its job's resource says when it is done", async () => {
  await resetBoards();
  await resetListings();
  await insertSource("Globex", "lever", boardUrl("/lever/globex"));
  // "Fetch new" waits 3 s here (playwright.config.ts); the board answers after 6 s.
  await slowBoard("/lever/globex", 6_000);
  const client = await connect();
  try {
    await client.listTools();
    const progress: { progress: number; total?: number; message?: string }[] = [];
    const started = Date.now();
    const result = await client.callTool({ name: "jobs.fetch_new", arguments: {} }, undefined, {
      onprogress: (report) => progress.push(report),
    });
    const receipt = result.structuredContent as { pending: boolean; job_ids: number[] };
    expect(receipt.pending).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_900);
    // At least one report every 2 s of the 3 s wait, the first at once.
    expect(progress.length).toBeGreaterThanOrEqual(2);
    expect(progress[0].total).toBe(3);
    const uri = `standmeet://jobs/${receipt.job_ids[0]}`;
    // The receipt keeps the contract's shape; its job's resource is in _meta.
    expect(Object.keys(receipt).sort()).toEqual(["job_ids", "pending"]);
    expect(result._meta?.["standmeet/job_resources"]).toEqual([uri]);
    expect(progress[progress.length - 1].message).toContain(uri);
    console.log(
      `jobs.fetch_new: ${progress.length} progress notifications in ${Date.now() - started} ms, then ${JSON.stringify(receipt)}, _meta ${JSON.stringify(result._meta)}`,
    );

    const updated = new Promise<string>((resolve) =>
      client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) =>
        resolve(notification.params.uri),
      ),
    );
    await client.subscribeResource({ uri });
    const running = await client.readResource({ uri });
    expect(running.contents[0].mimeType).toBe("application/json");
    expect(["available", "running", "retryable"]).toContain(JSON.parse(running.contents[0].text as string).state);
    expect(await updated).toBe(uri);
    const done = await client.readResource({ uri });
    const job = JSON.parse(done.contents[0].text as string);
    expect(job.state).toBe("completed");
    console.log(`${uri} updated after ${Date.now() - started} ms: ${job.state}`);
  } finally {
    await client.close();
  }
});
