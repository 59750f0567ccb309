// Starts `flowc lsp` (pip install 'flowc[lsp]') for .flow files, over stdio.
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const [command, ...args] = vscode.workspace.getConfiguration("flowc").get("command");
  client = new LanguageClient(
    "flowc",
    "flowc",
    { command, args, transport: 0 /* stdio */ },
    { documentSelector: [{ scheme: "file", language: "flow" }] }
  );
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
