// What the editor agents of the Go end-to-end tests (yws/agent.mjs, hocuspocus/agent.mjs)
// share: the request loop over stdin/stdout, waiting for a condition, and the operations on
// an editor's awareness. It imports no package, so that each agent brings its own.
import readline from 'node:readline'

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// waitUntil polls cond every 10 ms until it returns a truthy value, which it resolves with;
// after timeoutMs (default 20 s) it fails, naming what it waited for.
export async function waitUntil (what, timeoutMs, cond) {
  const deadline = Date.now() + (timeoutMs ?? 20000)
  for (;;) {
    const v = cond()
    if (v) return v
    if (Date.now() > deadline) throw new Error('timed out waiting for ' + what)
    await sleep(10)
  }
}

// awarenessOps are the operations on the awareness of the editor named in a request;
// awarenessOf returns it (a y-protocols Awareness).
export function awarenessOps (awarenessOf) {
  return {
    // setLocalState: the editor's whole awareness state.
    async setLocalState ({ name, state }) { awarenessOf(name).setLocalState(state); return null },
    async states ({ name }) {
      const out = []
      awarenessOf(name).getStates().forEach((state, clientID) => out.push({ clientID, state }))
      return out
    },
    // waitPresence: wait until the editor's awareness holds a state whose user.name is user
    // (and, when state is given, whose whole state equals it as JSON) — or, with gone, until
    // it holds none; it resolves with the milliseconds waited.
    async waitPresence ({ name, user, state, gone, timeoutMs }) {
      const aw = awarenessOf(name)
      const want = state === undefined ? undefined : JSON.stringify(state)
      const start = Date.now()
      const holds = () => {
        for (const s of aw.getStates().values()) {
          if (s && s.user && s.user.name === user && (want === undefined || JSON.stringify(s) === want)) return true
        }
        return false
      }
      await waitUntil(name + (gone ? ' loses ' : ' sees ') + user, timeoutMs, () => gone ? !holds() : holds())
      return Date.now() - start
    }
  }
}

// serve answers requests, one JSON object per line of stdin, {"id":N,"op":"…",…}, with the
// function of ops named by op; each answer is one line of stdout, {"id":N,"ok":true,
// "result":…} or {"id":N,"ok":false,"error":"…"}. Requests run concurrently (a wait does
// not block the next request). When stdin closes it calls shutdown and exits.
export function serve (ops, shutdown) {
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
  const reply = (obj) => process.stdout.write(JSON.stringify(obj) + '\n')
  rl.on('line', (line) => {
    if (!line.trim()) return
    let req
    try { req = JSON.parse(line) } catch (err) { reply({ id: 0, ok: false, error: 'bad request: ' + err.message }); return }
    const fn = ops[req.op]
    if (!fn) { reply({ id: req.id, ok: false, error: 'unknown op ' + req.op }); return }
    fn(req).then((result) => reply({ id: req.id, ok: true, result }), (err) => reply({ id: req.id, ok: false, error: String(err && err.message || err) }))
  })
  rl.on('close', () => {
    try { shutdown() } catch {}
    process.exit(0)
  })
}
