{
  description = "roster: AI workers (the pi coding agent) in locked-down Docker boxes behind a credential-injecting gateway";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-25.11";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      forAll = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
    in {
      devShells = forAll (pkgs: {
        default = pkgs.mkShell {
          packages = [
            pkgs.nodejs_24
            pkgs.docker-client
            pkgs.iptables
            pkgs.iproute2
            pkgs.pkgsStatic.busybox
          ];
          shellHook = ''
            echo "roster dev shell: node $(node --version); run: npm ci && npm test"
          '';
        };
      });
    };
}
