from benchrunner.cli import main

raise SystemExit(main())
