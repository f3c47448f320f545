// A client of sandbox serve written against the types openapi-typescript
// generates from openapi.yaml (./schema.d.ts, made by the Go test beside
// this file's copy), through openapi-fetch. It does what an agent's tool
// would do with alice's key, then checks what bob and a caller without a
// key are answered, and prints a JSON summary for the test to judge.
import createClient from "openapi-fetch";
import type { paths } from "./schema.js";

const env = (name: string): string => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`${name} is not set`);
  return v;
};
const baseUrl = env("SANDBOX_URL");
const nonce = env("NONCE");
const port = process.env.PORT ?? "";

const asKey = (key: string) => createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${key}` } });
const alice = asKey(env("ALICE_KEY"));
const bob = asKey(env("BOB_KEY"));
const anonymous = createClient<paths>({ baseUrl });

const raw = { bodySerializer: (b: string) => b, headers: { "Content-Type": "application/octet-stream" } };
const summary: Record<string, unknown> = {};

const created = await alice.POST("/v1/sessions", { body: {} });
if (!created.data) throw new Error(`create a session: ${created.response.status} ${JSON.stringify(created.error)}`);
const id = created.data.id;
const session = { params: { path: { id } } };
summary.session_status = created.response.status;
summary.session_location = created.response.headers.get("Location");
summary.session_id = id;

const ran = await alice.POST("/v1/sessions/{id}/runs", { ...session, body: { command: ["sh", "-c", 'echo "$0"; command -v python3 >&2', nonce] } });
// The 200 answer is a RunResponse or, when asked for, a stream's events:
// this run asked for no stream, so its answer has a cause.
const result = ran.data && "cause" in ran.data ? ran.data : undefined;
summary.run_status = ran.response.status;
summary.run_exit_code = result?.exit_code;
summary.run_stdout = result?.stdout;
summary.python3 = (result?.stderr ?? "").trim() !== "";

const file = { params: { path: { id }, query: { path: "dir/hello.txt" } } };
const put = await alice.PUT("/v1/sessions/{id}/files", { ...file, ...raw, body: `hello ${nonce}\n` });
summary.put_status = put.response.status;
const got = await alice.GET("/v1/sessions/{id}/files", { ...file, parseAs: "text" });
summary.get_status = got.response.status;
summary.get_body = got.data;

const tar = await alice.GET("/v1/sessions/{id}/tar", { params: { path: { id }, query: { path: "dir" } }, parseAs: "arrayBuffer" });
summary.tar_status = tar.response.status;
const tarText = tar.data ? Buffer.from(tar.data).toString("latin1") : "";
summary.tar_has_file = tarText.includes("hello.txt") && tarText.includes(`hello ${nonce}\n`);

if (port !== "" && summary.python3) {
  const started = await alice.POST("/v1/sessions/{id}/processes", {
    ...session,
    body: { command: ["python3", "-m", "http.server", port, "--bind", "127.0.0.1", "--directory", "dir"] },
  });
  summary.process_status = started.response.status;
  const page = { params: { path: { id, port: Number(port), path: "hello.txt" } }, parseAs: "text" as const };
  let proxied = await alice.GET("/v1/sessions/{id}/ports/{port}/{path}", page);
  for (let i = 0; i < 300 && proxied.response.status === 502; i++) {
    await new Promise((r) => setTimeout(r, 100)); // the server is starting
    proxied = await alice.GET("/v1/sessions/{id}/ports/{port}/{path}", page);
  }
  summary.port_status = proxied.response.status;
  summary.port_body = proxied.data ?? null;
}

const none = await anonymous.GET("/v1/sessions/{id}", session);
summary.no_key_status = none.response.status;
summary.no_key_www_authenticate = none.response.headers.get("WWW-Authenticate");
summary.no_key_error = none.error ?? null;

const bobGet = await bob.GET("/v1/sessions/{id}", session);
summary.bob_get_status = bobGet.response.status;
summary.bob_get_error = bobGet.error ?? null;
const bobPut = await bob.PUT("/v1/sessions/{id}/files", { ...file, ...raw, body: "bob was here\n" });
summary.bob_put_status = bobPut.response.status;
const bobDelete = await bob.DELETE("/v1/sessions/{id}", session);
summary.bob_delete_status = bobDelete.response.status;
const after = await alice.GET("/v1/sessions/{id}/files", { ...file, parseAs: "text" });
summary.after_bob_body = after.data;

const deleted = await alice.DELETE("/v1/sessions/{id}", session);
summary.delete_status = deleted.response.status;

console.log(JSON.stringify(summary));
