defmodule Grove.ArchitectureTest do
  # The dependencies between the areas of lib/ (docs/architecture.md), read
  # from the compiled modules: every remote call of a module of one area to
  # a module of another is an arrow. Areas are layered, lowest first; an
  # arrow from a lower area to a higher one closes a cycle, and is refused
  # unless it is one of the known ones below, each with what keeps it.
  use ExUnit.Case, async: true

  @layers ~w(tools metrics cluster world game protocol actor actors games store accounts gateway instance)

  # Arrows against the layers that are still there, and why. The list only
  # shrinks: an arrow listed here that is gone fails the test too, so that
  # it is taken off. (The last ones went when each part came to export its
  # own metrics, `Grove.Metrics.Source`, and the collector only to gather.)
  @known %{}

  test "dependencies between areas go one way, but for the known arrows" do
    arrows = arrows()

    against =
      for {from, to} <- arrows,
          rank(from) < rank(to),
          not Map.has_key?(@known, {from, to}),
          do: {from, to}

    assert against == [],
           "arrows from a lower area to a higher one (docs/architecture.md): #{inspect(against)}; " <>
             "modules: #{inspect(for(arrow <- against, do: {arrow, examples(arrow)}))}"

    gone = for arrow <- Map.keys(@known), arrow not in arrows, do: arrow
    assert gone == [], "known arrows no longer there, to take off the list: #{inspect(gone)}"
  end

  test "every module of lib/ belongs to an area" do
    for {module, source} <- modules() do
      assert area(source) in @layers,
             "#{inspect(module)} (#{source}) is in no area: give it one in area/1 here " <>
               "and in docs/architecture.md"
    end
  end

  defp rank(area), do: Enum.find_index(@layers, &(&1 == area))

  # {from_area, to_area} for every call between areas.
  defp arrows, do: calls() |> Enum.map(fn {from, to, _, _} -> {from, to} end) |> Enum.uniq()

  defp examples({from, to}) do
    for {^from, ^to, caller, callee} <- calls(), uniq: true, do: {caller, callee}
  end

  defp calls do
    modules = modules()
    areas = Map.new(modules, fn {module, source} -> {module, area(source)} end)

    for {module, _source} <- modules,
        {:ok, {_, [imports: imports]}} = :beam_lib.chunks(:code.which(module), [:imports]),
        {callee, _function, _arity} <- imports,
        to = areas[callee],
        to != nil and to != areas[module],
        uniq: true,
        do: {areas[module], to, module, callee}
  end

  # The modules compiled from lib/, with their source, relative to the project.
  defp modules do
    root = File.cwd!()

    for module <- Application.spec(:grove, :modules),
        source = to_string(module.module_info(:compile)[:source]),
        relative = Path.relative_to(source, root),
        String.starts_with?(relative, "lib/"),
        do: {module, relative}
  end

  defp area("lib/grove.ex"), do: "instance"
  defp area("lib/mix/" <> _), do: "world"

  defp area("lib/grove/" <> rest) do
    case rest |> String.split("/") |> hd() |> Path.rootname() do
      name when name in ~w(application config status release summary reloader) -> "instance"
      name when name in ~w(secret permits rate_limit text spawn_options) -> "tools"
      name -> name
    end
  end
end
