defmodule Grove.MixProject do
  use Mix.Project

  # Grove uses no hex packages: every dependency is an Erlang application that
  # Debian installs under /usr/lib/erlang/lib (already on the code path), except
  # Yaws, whose code lives in /usr/lib/yaws-*/ebin. Two of them are not where a
  # release looks for an application (a directory named after it, among
  # others of its kind): Yaws, alone in /usr/lib, and sqlite3, in a directory
  # named p1_sqlite3-*. Links under _build/erl_libs give both a proper place.
  libs = Path.expand("_build/erl_libs", __DIR__)

  for {dir, name} <- [
        {"/usr/lib/yaws-*", "yaws"},
        {"/usr/lib/erlang/lib/p1_sqlite3-*", "sqlite3"}
      ],
      source <- Path.wildcard(dir) do
    link =
      Path.join(
        libs,
        name <> "-" <> (source |> Path.basename() |> String.split("-") |> List.last())
      )

    File.mkdir_p!(libs)
    unless File.exists?(link), do: File.ln_s!(source, link)
    Code.prepend_path(Path.join(link, "ebin"))
  end

  def project do
    [
      app: :grove,
      version: "0.1.0",
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      elixirc_paths: elixirc_paths(Mix.env()),
      deps: [],
      aliases: aliases(),
      # Yaws is an included application from Debian's ebin directory; xref
      # does not see it as a dependency.
      xref: [exclude: [:yaws_api, :yaws, :cow_ws]],
      test_coverage: [summary: [threshold: 0]],
      releases: [
        grove: [include_erts: true, strip_beams: false, steps: [:assemble, &yaws_headers/1]]
      ]
    ]
  end

  def application do
    [
      # Yaws compiles a small module when it starts, hence :compiler.
      extra_applications:
        [
          :logger,
          :runtime_tools,
          :crypto,
          :compiler,
          :inets,
          :jiffy,
          :cowlib,
          :sqlite3,
          :p1_pgsql
        ] ++
          test_applications(Mix.env()),
      # Yaws runs embedded in Grove's own tree: loaded with the application,
      # never started as an application of its own.
      included_applications: [:yaws],
      mod: {Grove.Application, []}
    ]
  end

  # PropEr (Debian's erlang-proper) backs the property tests.
  defp test_applications(:test), do: [:proper]
  defp test_applications(_), do: []

  defp elixirc_paths(:test), do: ["lib", "test/support"]
  defp elixirc_paths(_), do: ["lib"]

  # The load lab, the benches and the chaos runner are a Mix project of their
  # own in lab/ (they are not part of the product, nor of its release). From
  # here their tasks run there, with the same arguments.
  @lab_tasks ~w(grove.load grove.chaos grove.bench.actors grove.bench.cluster
    grove.bench.failover grove.bench.frames grove.bench.life grove.bench.peers
    grove.bench.players grove.bench.views grove.bench.names)

  defp aliases do
    for task <- @lab_tasks, do: {String.to_atom(task), fn args -> lab(task, args) end}
  end

  defp lab(task, args) do
    lab = Path.expand("lab", __DIR__)

    {_, status} =
      System.cmd("mix", [task | args],
        cd: lab,
        into: IO.binstream(:stdio, :line),
        stderr_to_stdout: true
      )

    # The lab's task said what went wrong; its status is this one's.
    if status != 0, do: exit({:shutdown, status})
  end

  # Yaws compiles two modules as it starts (its options, and the MIME types
  # Grove adds), against its own headers, which a release leaves out: they
  # are copied into the release's Yaws.
  defp yaws_headers(release) do
    yaws = Path.join(release.path, "lib/yaws-#{release.applications.yaws[:vsn]}")
    File.mkdir_p!(Path.join(yaws, "include"))

    for header <- Path.wildcard("/usr/lib/yaws/include/*.hrl"),
        do: File.cp!(header, Path.join([yaws, "include", Path.basename(header)]))

    release
  end
end
