defmodule Grove.Lab.MixProject do
  use Mix.Project

  # Grove's lab: the load runners, the benches, the chaos and fuzz runners
  # and their Mix tasks. A project of its own that depends on Grove by path,
  # so that none of it is compiled into the product or shipped in its
  # release. Its WebSocket client and port picker are the tests' own
  # (../test/support/net), and so are the config of a session its benches
  # drive by hand and the world of a million cells a side its benches of
  # zones wake in (../test/support/shared), compiled here too rather than
  # copied; its tests use the rest of the product's test helpers the same
  # way. (Mix takes a source path outside the project as an absolute
  # directory.)
  @support Path.expand("../test/support", __DIR__)

  def project do
    [
      app: :grove_lab,
      version: "0.1.0",
      elixir: "~> 1.14",
      elixirc_paths: elixirc_paths(Mix.env()),
      deps: [{:grove, path: ".."}],
      # Yaws and cowlib are Debian's, outside Mix's view of dependencies.
      xref: [exclude: [:yaws_api, :yaws, :cow_ws]]
    ]
  end

  def application do
    [extra_applications: [:logger, :inets, :cowlib, :jiffy] ++ test_applications(Mix.env())]
  end

  # PropEr (Debian's erlang-proper) backs the property tests.
  defp test_applications(:test), do: [:proper]
  defp test_applications(_), do: []

  defp elixirc_paths(:test), do: ["lib", @support]
  defp elixirc_paths(_), do: ["lib", Path.join(@support, "net"), Path.join(@support, "shared")]
end
