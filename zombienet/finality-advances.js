// zombienet js-script: finality goes on while one of the four authorities is down. Reads the node's
// finalized height, then waits for it to grow by `args[0]` blocks (default 5) and for the authority set to
// still be all four (so the blocks were finalized by 3 of 4 votes, not by a smaller set). Returns 1 then;
// the DSL's `within N seconds` bounds the wait.
async function run(nodeName, networkInfo, args) {
  const { wsUri, userDefinedTypes } = networkInfo.nodesByName[nodeName];
  const api = await zombie.connect(wsUri, userDefinedTypes);
  const more = Number((args && args[0]) || 5);
  const head = await api.rpc.chain.getFinalizedHead();
  const start = (await api.rpc.chain.getHeader(head)).number.toNumber();
  await new Promise((resolve, reject) => {
    api.rpc.chain
      .subscribeFinalizedHeads((h) => {
        if (h.number.toNumber() >= start + more) resolve();
      })
      .catch(reject);
  });
  const authorities = await api.query.grandpa.authorities();
  await api.disconnect();
  return authorities.length === 4 ? 1 : 0;
}

module.exports = { run };
