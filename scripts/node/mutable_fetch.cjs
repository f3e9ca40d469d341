// Preloaded into Portkey's gateway (`node --require`): each response its fetch gets is handed on as a new
// Response with the same status, headers and body stream. Portkey 1.15.2 adds its own headers to the
// provider's response, which Node's fetch makes immutable: every stream it passes on or maps fails with
// `TypeError: immutable` ("Something went wrong"; Portkey-AI/gateway issues 1389 and 1550). Its open fix
// (pull request 1551) makes the same copy. Not a byte of any body changes.
"use strict";
const fetch = globalThis.fetch;
globalThis.fetch = async (...args) => {
  const response = await fetch(...args);
  return new Response(response.body, {
    status: response.status,
    statusText: response.statusText,
    headers: new Headers(response.headers),
  });
};
