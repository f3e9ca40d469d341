// Preloaded into a Node server the tests run (`node --require`): every server it starts listens on
// 127.0.0.1 only, whatever host it asked for. Portkey's gateway asks for none, which Node takes as every
// interface; this project's processes listen on loopback only.
"use strict";
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (first !== null && typeof first === "object" && !Array.isArray(first) && !("fd" in first)) {
    if (!("path" in first)) args[0] = { ...first, host: "127.0.0.1" };
  } else if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    if (typeof args[1] === "string") args[1] = "127.0.0.1";
    else args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
