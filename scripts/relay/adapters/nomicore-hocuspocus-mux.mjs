// Relay-benchmark adapter "nomicore-hocuspocus-mux": "nomicore-hocuspocus" (the hub's
// Hocuspocus endpoint) with many documents over one socket, as a HocuspocusProviderWebsocket
// carries them: harness client k of every document shares socket k (multidoc: 2 sockets of
// 200 documents each). Compare with "hocuspocus-mux". Registered by scripts/relay/run.sh and
// scripts/benchrelay/bench.sh like the other adapters.
import { nomicoreHocuspocus, withSharedSockets } from './nomicore-hocuspocus.mjs'

export const nomicoreHocuspocusMux = () => {
  const spec = nomicoreHocuspocus()
  return withSharedSockets(spec, spec.addressOf)
}
