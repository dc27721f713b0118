for adapter <- [:sqlite, :postgres] do
  defmodule Module.concat(Grove.AccountsTest, Macro.camelize(Atom.to_string(adapter))) do
    use Grove.StoreCase, adapter: adapter, async: true

    alias Grove.Accounts
    alias Grove.Accounts.{Saver, Token}
    alias Grove.World

    setup %{store: store} = context do
      world = :"accounts_world_#{System.unique_integer([:positive])}"

      start_supervised!(
        {World,
         name: world,
         width: 30,
         height: 30,
         zone_size: 10,
         tick: :manual,
         terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0],
         rules: [move_rate: nil]}
      )

      name = :"accounts_#{System.unique_integer([:positive])}"

      opts =
        Keyword.merge(
          [name: name, store: store, world: world, password_cost: 1000, save_interval: 60_000],
          context[:accounts] || []
        )

      start_supervised!({Accounts, opts}, id: name)
      %{accounts: name, world: world}
    end

    defp kill_and_await_restart(name) do
      pid = Process.whereis(name)
      Process.exit(pid, :kill)
      eventually(fn -> assert Process.whereis(name) not in [nil, pid] end)
    end

    describe "device login" do
      test "creates the account the first time, then logs into it", %{accounts: accounts} do
        assert {:ok, token, account, :created} = Accounts.device_login(accounts, "device-0001")
        assert {:ok, token2, ^account, :existing} = Accounts.device_login(accounts, "device-0001")
        assert token != token2
        assert {:ok, ^account, _} = Accounts.authenticate(accounts, token)
        assert {:ok, ^account, _} = Accounts.authenticate(accounts, token2)
        assert account.name == nil
      end

      test "refuses device ids that are too short, too long or hold control characters", %{
        accounts: accounts
      } do
        for bad <- ["short", String.duplicate("x", 200), "device\u0000id!", 42] do
          assert {:error, :invalid_device} = Accounts.device_login(accounts, bad)
        end
      end

      @tag accounts: [ip_rate: 1, ip_burst: 3]
      test "is rate limited per address", %{accounts: accounts} do
        results =
          for n <- 1..10,
              do: Accounts.device_login(accounts, "device-#{1000 + n}", ip: {10, 0, 0, 1})

        assert Enum.count(results, &match?({:ok, _, _, _}, &1)) <= 4
        assert {:error, :rate_limited} in results
        # Another address is not held back by the first.
        assert {:ok, _, _, _} = Accounts.device_login(accounts, "device-2000", ip: {10, 0, 0, 2})
      end
    end

    describe "names and passwords" do
      test "register, log in, and refuse the wrong password or an unknown name alike", %{
        accounts: accounts
      } do
        assert {:ok, _token, account} = Accounts.register(accounts, "ada", "correct horse")
        assert account.name == "ada"
        assert {:ok, token, ^account} = Accounts.login(accounts, "ada", "correct horse")
        assert {:ok, ^account, _} = Accounts.authenticate(accounts, token)
        assert {:error, :invalid_credentials} = Accounts.login(accounts, "ada", "wrong horse!")

        assert {:error, :invalid_credentials} =
                 Accounts.login(accounts, "nobody", "correct horse")

        assert {:error, :name_taken} = Accounts.register(accounts, "ada", "another password")
      end

      test "names are checked, normalised, and SQL-looking ones refused before the store sees them",
           %{accounts: accounts} do
        for bad <- [
              "ab",
              "robert'); DROP TABLE accounts;--",
              "a b c",
              "x;y",
              String.duplicate("n", 25),
              "",
              nil
            ] do
          assert {:error, :invalid_name} =
                   Accounts.register(accounts, bad, "long enough password")
        end

        assert {:error, :weak_password} = Accounts.register(accounts, "eve", "short")
        # Composed and decomposed "é" are one name.
        assert {:ok, _, _} = Accounts.register(accounts, "jos\u00e9", "long enough password")

        assert {:error, :name_taken} =
                 Accounts.register(accounts, "jose\u0301", "long enough password")

        assert {:ok, _, _} = Accounts.login(accounts, "jose\u0301", "long enough password")
      end

      @tag accounts: [
             password_cost: 200_000,
             hash_concurrency: 1,
             hash_queue: 1,
             hash_timeout: 20
           ]
      test "a login storm gets fast refusals instead of a queue", %{accounts: accounts} do
        results =
          1..6
          |> Enum.map(fn n ->
            Task.async(fn -> Accounts.register(accounts, "storm#{n}", "long enough password") end)
          end)
          |> Enum.map(&Task.await(&1, 30_000))

        assert {:error, :busy} in results
      end
    end

    describe "tokens" do
      test "logging out revokes the token", %{accounts: accounts} do
        {:ok, token, _account, _} = Accounts.device_login(accounts, "device-0002")
        assert :ok = Accounts.logout(accounts, token)
        assert {:error, :revoked} = Accounts.authenticate(accounts, token)
      end

      test "forged, foreign and expired tokens are refused", %{accounts: accounts} do
        {:ok, token, account, _} = Accounts.device_login(accounts, "device-0003")
        assert {:error, :invalid_token} = Accounts.authenticate(accounts, token <> "x")
        assert {:error, :invalid_token} = Accounts.authenticate(accounts, "v1.garbage.garbage")

        {foreign, _} =
          Token.sign(:crypto.strong_rand_bytes(32), account.id, System.system_time(:second) + 60)

        assert {:error, :invalid_token} = Accounts.authenticate(accounts, foreign)

        {expired, _} =
          Token.sign(
            Accounts.fetch!(accounts).secret,
            account.id,
            System.system_time(:second) - 1
          )

        assert {:error, :expired} = Accounts.authenticate(accounts, expired)
      end

      test "a revocation recorded by another server is honoured", %{
        accounts: accounts,
        store: store
      } do
        {:ok, token, _account, _} = Accounts.device_login(accounts, "device-0004")

        {:ok, %{id: token_id}} =
          Token.verify(Accounts.fetch!(accounts).secret, token, System.system_time(:second))

        # Another server wrote the revocation; this one has the token cached as valid.
        :ok = Grove.Store.revoke_token(store, token_id)
        :ets.delete(Accounts.fetch!(accounts).tokens_cache, token_id)
        assert {:error, :revoked} = Accounts.authenticate(accounts, token)
      end
    end

    describe "changes" do
      test "an update is seen at once, never a stale cached account", %{accounts: accounts} do
        {:ok, token, account, _} = Accounts.device_login(accounts, "device-0005")
        assert {:ok, ^account, _} = Accounts.authenticate(accounts, token)

        assert {:ok, updated} =
                 Accounts.update(accounts, account.id, %{name: "walker", avatar: "🦊"})

        assert {:ok, ^updated, _} = Accounts.authenticate(accounts, token)
        assert updated.name == "walker" and updated.avatar == "🦊"

        {:ok, _, other, _} = Accounts.device_login(accounts, "device-0006")
        assert {:error, :name_taken} = Accounts.update(accounts, other.id, %{name: "walker"})

        assert {:error, :invalid_avatar} =
                 Accounts.update(accounts, other.id, %{avatar: "not an emoji at all"})
      end

      test "an avatar is one emoji, the same rule at registration and on change", %{
        accounts: accounts
      } do
        {:ok, _, account, _} = Accounts.device_login(accounts, "device-0012")

        bad = [
          "",
          "\u0000",
          "x",
          "ab",
          "x\ny",
          "<img src=x onerror=alert(1)>",
          String.duplicate("🦊", 300),
          "🦊🦉",
          "🦊\u0000"
        ]

        for {avatar, index} <- Enum.with_index(bad) do
          assert {:error, :invalid_avatar} =
                   Accounts.register(accounts, "avatar#{index}", "long enough password",
                     avatar: avatar
                   ),
                 "registered with #{inspect(avatar)}"

          assert {:error, :invalid_avatar} =
                   Accounts.update(accounts, account.id, %{avatar: avatar}),
                 "changed to #{inspect(avatar)}"
        end

        # A skin tone, a family (joined by ZWJ), a flag, a keycap, a symbol.
        for {avatar, index} <- Enum.with_index(["🦊", "👍🏽", "👨‍👩‍👧", "🇫🇷", "1️⃣", "☀️"]) do
          assert {:ok, _, %{avatar: ^avatar}} =
                   Accounts.register(accounts, "good#{index}", "long enough password",
                     avatar: avatar
                   )

          assert {:ok, %{avatar: ^avatar}} =
                   Accounts.update(accounts, account.id, %{avatar: avatar})
        end
      end
    end

    describe "positions" do
      test "are saved behind in batches and on leaving, and restored", %{
        accounts: accounts,
        world: world
      } do
        {:ok, _, a, _} = Accounts.device_login(accounts, "device-0007")
        {:ok, _, b, _} = Accounts.device_login(accounts, "device-0008")
        {:ok, entity, _} = World.join(world, at: {5, 5})
        :ok = Accounts.playing(accounts, a.id, entity)
        :ok = World.move(world, entity, :e, 1)
        assert_receive {:grove_move, ^entity, 1, {:ok, {6, 5}}}
        :ok = Accounts.left(accounts, b.id, {20, 21})

        :ok = Saver.flush(Accounts.fetch!(accounts).saver)
        assert Accounts.last_position(accounts, a.id) == {:ok, {6, 5}}
        assert Accounts.last_position(accounts, b.id) == {:ok, {20, 21}}
      end

      test "a store that cannot answer is not mistaken for a player never saved", %{
        accounts: accounts,
        store: store
      } do
        {:ok, _, a, _} = Accounts.device_login(accounts, "device-0010")
        :ok = Accounts.left(accounts, a.id, {3, 4})
        :ok = Saver.flush(Accounts.fetch!(accounts).saver)
        {:ok, _, b, _} = Accounts.device_login(accounts, "device-0011")
        assert Accounts.last_position(accounts, a.id) == {:ok, {3, 4}}
        assert Accounts.last_position(accounts, b.id) == {:error, :not_found}

        :ok = stop_supervised(store)
        assert Accounts.last_position(accounts, a.id) == {:error, :unavailable}
      end

      test "a saver that crashes carries on with the players it knew", %{
        accounts: accounts,
        world: world
      } do
        {:ok, _, a, _} = Accounts.device_login(accounts, "device-0012")
        {:ok, entity, _} = World.join(world, at: {5, 5})
        :ok = Accounts.playing(accounts, a.id, entity)
        saver = Accounts.fetch!(accounts).saver
        kill_and_await_restart(saver)

        :ok = World.move(world, entity, :s, 1)
        assert_receive {:grove_move, ^entity, 1, {:ok, {5, 6}}}
        :ok = Saver.flush(saver)
        assert Accounts.last_position(accounts, a.id) == {:ok, {5, 6}}
      end

      test "a saver killed again and again restarts alone, never the service", %{
        accounts: accounts
      } do
        service = Process.whereis(accounts)
        saver = Accounts.fetch!(accounts).saver
        for _ <- 1..6, do: kill_and_await_restart(saver)
        assert Process.whereis(accounts) == service
      end

      # The deadline passes long before the database gives up on the lock.
      @tag store:
             [timeout: 500] ++
               if(adapter == :sqlite,
                 do: [busy_timeout: 60_000],
                 else: [statement_timeout: 4_900]
               )
      @tag accounts: [flush_timeout: 60_000]
      test "a stop writes the last batch once a stalled store takes it", context do
        %{accounts: accounts, world: world, store: store} = context
        # The account made with a deadline of its own, as the read at the
        # end: the store's is kept short for the stop's first try alone.
        {:ok, a} = Grove.Store.create_account(store, %{device_id: "device-0013"}, timeout: 10_000)
        {:ok, entity, _} = World.join(world, at: {8, 8})
        :ok = Accounts.playing(accounts, a.id, entity)
        release = hold_write_lock(context)
        before = Grove.Store.stats(store).timed_out

        # The lock goes once the stop's first try has failed.
        releaser =
          Task.async(fn ->
            eventually(fn -> assert Grove.Store.stats(store).timed_out > before end, 6000)
            release.()
          end)

        :ok = stop_supervised(accounts)
        Task.await(releaser, :infinity)
        # Read with a deadline of its own too: one a read can miss on a busy machine.
        assert {:ok, {8, 8}} = Grove.Store.fetch_position(store, a.id, timeout: 10_000)
      end

      test "the last batch is written when the service stops", %{accounts: accounts, world: world} do
        {:ok, _, a, _} = Accounts.device_login(accounts, "device-0009")
        {:ok, entity, _} = World.join(world, at: {7, 7})
        :ok = Accounts.playing(accounts, a.id, entity)
        :ok = stop_supervised(accounts)
        store = Accounts.fetch!(accounts).store
        assert {:ok, {7, 7}} = Grove.Store.fetch_position(store, a.id)
      end
    end
  end
end
