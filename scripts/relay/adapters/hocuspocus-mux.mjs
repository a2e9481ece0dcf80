// Relay-benchmark adapter "hocuspocus-mux": the harness's @hocuspocus/server ("hocuspocus")
// with many documents over one socket, as a HocuspocusProviderWebsocket carries them:
// harness client k of every document shares socket k (multidoc: 2 sockets of 200 documents
// each). The counterpart of "nomicore-hocuspocus-mux".
import { SERVERS } from './adapters.mjs'
import { withSharedSockets } from './nomicore-hocuspocus.mjs'

export const hocuspocusMux = () => {
  return withSharedSockets(SERVERS.hocuspocus, (doc) => doc)
}
