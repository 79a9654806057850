// zombienet js-script: Dave registers as a miner through pallet-iota on the node under test. Returns 1 when
// the extrinsic is in a block with a MinerRegistered event for Dave and his record holds the same stage,
// 0 otherwise (a dispatch error rejects with the pallet's error name).
async function run(nodeName, networkInfo) {
  const { wsUri, userDefinedTypes } = networkInfo.nodesByName[nodeName];
  const api = await zombie.connect(wsUri, userDefinedTypes);
  await zombie.util.cryptoWaitReady();
  const dave = new zombie.Keyring({ type: "sr25519" }).addFromUri("//Dave");

  const stage = await new Promise((resolve, reject) => {
    api.tx.iota
      .registerMiner()
      .signAndSend(dave, ({ status, events, dispatchError }) => {
        if (dispatchError) {
          const d = dispatchError.isModule ? api.registry.findMetaError(dispatchError.asModule) : null;
          reject(new Error(d ? `${d.section}.${d.name}` : dispatchError.toString()));
        } else if (status.isInBlock) {
          const ev = events.find(({ event }) => api.events.iota.MinerRegistered.is(event));
          ev ? resolve(ev.event.data.stage.toNumber()) : reject(new Error("no MinerRegistered event"));
        }
      })
      .catch(reject);
  });

  const record = await api.query.iota.miners(dave.address);
  await api.disconnect();
  return record.isSome && record.unwrap().stage.toNumber() === stage ? 1 : 0;
}

module.exports = { run };
