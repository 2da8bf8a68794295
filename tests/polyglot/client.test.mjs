// A polyglot client: loads protos/ directly with @grpc/proto-loader, creates a canvas in the store,
// runs it through the orchestrator and checks the typed event sequence.
// Run by tests/polyglot/test_node_client.py, which starts the services and sets:
//   CANVAS_STORE_ADDR, ORCHESTRATOR_ADDR, AGENT_CANVAS_TOKEN, PROTO_ROOT
import { test } from "node:test";
import assert from "node:assert/strict";
import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";

const protoRoot = process.env.PROTO_ROOT;
const definition = protoLoader.loadSync(
  ["agentcanvas/v1/canvas_store.proto", "agentcanvas/v1/orchestrator.proto"],
  { includeDirs: [protoRoot], keepCase: true, longs: Number, enums: String, defaults: false, oneofs: true },
);
const v1 = grpc.loadPackageDefinition(definition).agentcanvas.v1;
const credentials = grpc.credentials.createInsecure();
const store = new v1.CanvasStore(process.env.CANVAS_STORE_ADDR, credentials);
const orchestrator = new v1.Orchestrator(process.env.ORCHESTRATOR_ADDR, credentials);

function auth() {
  const metadata = new grpc.Metadata();
  metadata.set("authorization", `Bearer ${process.env.AGENT_CANVAS_TOKEN}`);
  return metadata;
}

// google.protobuf.Struct in proto-loader's object form.
function toValue(value) {
  if (value === null) return { nullValue: "NULL_VALUE" };
  if (Array.isArray(value)) return { listValue: { values: value.map(toValue) } };
  switch (typeof value) {
    case "string": return { stringValue: value };
    case "number": return { numberValue: value };
    case "boolean": return { boolValue: value };
    default: return { structValue: toStruct(value) };
  }
}
function toStruct(object) {
  return { fields: Object.fromEntries(Object.entries(object).map(([k, v]) => [k, toValue(v)])) };
}

const dsl = {
  components: {
    begin: { obj: { component_name: "Begin", params: {} }, downstream: ["LLM:0"], upstream: [] },
    "LLM:0": {
      obj: {
        component_name: "LLM",
        params: { llm_id: "", sys_prompt: "Answer briefly.", prompts: [{ role: "user", content: "{sys.query}" }] },
      },
      downstream: ["Message:0"],
      upstream: ["begin"],
    },
    "Message:0": { obj: { component_name: "Message", params: { content: ["{LLM:0@content}"] } }, downstream: [], upstream: ["LLM:0"] },
  },
  globals: { "sys.query": "", "sys.user_id": "", "sys.conversation_turns": 0, "sys.files": [], "sys.history": [] },
  history: [],
  path: [],
  retrieval: [],
};

function unary(client, method, request) {
  return new Promise((resolve, reject) => client[method](request, auth(), (err, reply) => (err ? reject(err) : resolve(reply))));
}

function collect(call) {
  return new Promise((resolve, reject) => {
    const events = [];
    call.on("data", (event) => events.push(event));
    call.on("error", reject);
    call.on("end", () => resolve(events));
  });
}

test("create a canvas in the store and run it through the orchestrator", async () => {
  const canvas = await unary(store, "CreateCanvas", {
    canvas: { title: `polyglot ${Date.now()}`, dsl: toStruct(dsl) },
    request_id: crypto.randomUUID(),
  });
  assert.match(canvas.id, /^[0-9a-f]{32}$/);

  const events = await collect(orchestrator.RunCanvas({ canvas_id: canvas.id, query: "What is the capital of France?" }, auth()));
  const kinds = events.map((e) => e.event);
  assert.equal(kinds[0], "workflow_started");
  assert.equal(kinds.at(-1), "workflow_finished");
  assert.equal(events.at(-1).workflow_finished.status, "RUN_STATUS_SUCCEEDED", JSON.stringify(events.at(-1).workflow_finished.error));
  for (const kind of ["node_started", "node_finished", "message_delta", "message_end"]) {
    assert.ok(kinds.includes(kind), `missing ${kind} in ${kinds.join(",")}`);
  }
  assert.ok(kinds.indexOf("message_delta") < kinds.indexOf("message_end"));
  const seqs = events.map((e) => e.seq);
  for (let i = 1; i < seqs.length; i++) assert.ok(seqs[i] > seqs[i - 1], `seq not increasing: ${seqs}`);
  const runIds = new Set(events.map((e) => e.run_id));
  assert.equal(runIds.size, 1);
  const answer = events.filter((e) => e.event === "message_delta").map((e) => e.message_delta.content).join("");
  const end = events.find((e) => e.event === "message_end");
  assert.equal(end.message_end.content, answer);
  assert.ok(answer.length > 0);
});

test("an unknown canvas id is NOT_FOUND", async () => {
  const call = orchestrator.RunCanvas({ canvas_id: "0".repeat(32), query: "hi" }, auth());
  await assert.rejects(collect(call), (err) => err.code === grpc.status.NOT_FOUND);
});

test("a missing token is UNAUTHENTICATED", async () => {
  await assert.rejects(
    new Promise((resolve, reject) =>
      store.GetCanvas({ id: "0".repeat(32) }, new grpc.Metadata(), (err, reply) => (err ? reject(err) : resolve(reply)))),
    (err) => err.code === grpc.status.UNAUTHENTICATED,
  );
});

test("RunCanvasBatched carries the same typed events, grouped, in seq order", async () => {
  const canvas = await unary(store, "CreateCanvas", {
    canvas: { title: `polyglot batched ${Date.now()}`, dsl: toStruct(dsl) },
    request_id: crypto.randomUUID(),
  });
  const batches = await collect(orchestrator.RunCanvasBatched({ canvas_id: canvas.id, query: "And of Spain?" }, auth()));
  assert.ok(batches.length > 0);
  for (const batch of batches) assert.ok(batch.events.length > 0, "empty batch");
  const events = batches.flatMap((b) => b.events);
  const kinds = events.map((e) => e.event);
  assert.equal(kinds[0], "workflow_started");
  assert.equal(kinds.at(-1), "workflow_finished");
  assert.equal(events.at(-1).workflow_finished.status, "RUN_STATUS_SUCCEEDED");
  assert.deepEqual(events.map((e) => e.seq), events.map((_, i) => i + 1));
  const answer = events.filter((e) => e.event === "message_delta").map((e) => e.message_delta.content).join("");
  assert.equal(events.find((e) => e.event === "message_end").message_end.content, answer);

  // Reattaching with after_seq replays the rest the same way.
  const tail = await collect(orchestrator.StreamRunEventsBatched({ run_id: events[0].run_id, after_seq: 2 }, auth()));
  assert.deepEqual(tail.flatMap((b) => b.events).map((e) => e.seq), events.slice(2).map((e) => e.seq));
});
